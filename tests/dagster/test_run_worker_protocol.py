"""The warm run worker's launch protocol, without Spark or a run: the launcher reaches the
worker through DAGSTER_HOME/run-worker.json; a missing file, a dead address or a busy worker
each give the reason the run falls back to a process of its own."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from joins.spark.server import free_port
from pipelines.launcher import send_to_worker, worker_url
from pipelines.run_worker import WORKER_FILE, RunWorker, _Handler


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, RunWorker]]:
    worker = RunWorker(tmp_path)
    handler = type("Handler", (_Handler,), {"worker": worker})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    (tmp_path / WORKER_FILE).write_text(json.dumps(
        {"url": f"http://127.0.0.1:{server.server_port}", "pid": 1}))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield tmp_path, worker
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_no_worker_file_means_a_process_per_run(tmp_path: Path) -> None:
    assert worker_url(tmp_path) is None
    taken, why = send_to_worker(tmp_path, "run-1")
    assert taken is None and "no run worker" in why


def test_a_dead_address_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / WORKER_FILE).write_text(json.dumps({"url": f"http://127.0.0.1:{free_port()}"}))
    taken, why = send_to_worker(tmp_path, "run-1")
    assert taken is None and "does not answer" in why


def test_a_busy_worker_refuses_and_an_idle_one_takes_the_run(served: tuple[Path, RunWorker]) -> None:
    home, worker = served
    worker.running = "someone-else"
    taken, why = send_to_worker(home, "run-1")
    assert taken is None and "busy" in why
    worker.running = None
    started: list[str] = []
    worker._execute = started.append  # type: ignore[method-assign]  # no Dagster run here
    taken, why = send_to_worker(home, "run-2")
    assert taken is not None and taken["run_id"] == "run-2" and why == ""
    assert worker.running == "run-2"
