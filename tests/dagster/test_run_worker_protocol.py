"""The warm run worker's launch protocol, without Spark or a run: the launcher reaches the
worker through DAGSTER_HOME/run-worker.json; a missing file, a dead address or a busy worker
each give the reason the run falls back to a process of its own; runs launched while one
executes wait in the worker, first come first run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from joins.spark.server import free_port
from joins.spark.session import SparkSettings
from runplatform.launcher import send_to_worker, worker_url
from runplatform.run_worker import (
    WORKER_FILE,
    RunWorker,
    _Handler,
    scratch_dir,
    sweep_scratch,
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, RunWorker, list[str], threading.Event]]:
    executed: list[str] = []
    release = threading.Event()

    def execute(run_id: str) -> None:  # no Dagster run here: record it, hold until released
        executed.append(run_id)
        release.wait(10)

    worker = RunWorker(execute=execute)
    handler = type("Handler", (_Handler,), {"worker": worker})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    (tmp_path / WORKER_FILE).write_text(json.dumps(
        {"url": f"http://127.0.0.1:{server.server_port}", "pid": 1}))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield tmp_path, worker, executed, release
    finally:
        release.set()
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


def test_runs_wait_in_the_worker_first_come_first_run(served: Any) -> None:
    home, worker, executed, release = served
    first, why = send_to_worker(home, "run-1")
    assert first is not None and first["ahead"] == 0 and why == ""
    second, _ = send_to_worker(home, "run-2")
    assert second is not None and second["ahead"] == 1
    _until(lambda: executed == ["run-1"])
    assert worker.health()["running"] == "run-1" and worker.health()["queued"] == ["run-2"]
    release.set()
    _until(lambda: executed == ["run-1", "run-2"] and worker.health()["running"] is None)
    assert worker.health()["done"] == ["run-1", "run-2"]


def _until(condition: Any, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_run_whose_code_cannot_load_is_failed_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Otherwise it would stay "starting" in the UI forever."""
    import sys

    import dagster as dg
    from dagster import DagsterRun, DagsterRunStatus

    import runplatform.run_worker as run_worker
    from resources.dagster_private import (
        JobPythonOrigin,
        ModuleCodePointer,
        RepositoryPythonOrigin,
    )

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))

    def broken(origin: Any) -> None:
        raise SyntaxError("a broken spec module")

    monkeypatch.setattr(run_worker, "_reload_code", broken)
    origin = JobPythonOrigin("some_job", RepositoryPythonOrigin(
        sys.executable, ModuleCodePointer("pipelines.definitions", "defs", working_directory=None)))
    with dg.DagsterInstance.get() as instance:
        run = instance.add_run(DagsterRun(job_name="some_job", job_code_origin=origin,
                                          status=DagsterRunStatus.STARTING))
        with pytest.raises(SyntaxError):
            run_worker.execute_run(run.run_id)
        failed = instance.get_run_by_id(run.run_id)
        assert failed is not None and failed.status == DagsterRunStatus.FAILURE
        said = [e.message for e in instance.all_logs(run.run_id)]
        assert any("could not load the code location: SyntaxError: a broken spec module" in m
                   for m in said), said


def test_a_run_submitted_twice_is_queued_once(served: Any) -> None:
    """A launcher that timed out asks again; the worker must not run the run twice."""
    home, worker, executed, release = served
    assert send_to_worker(home, "run-1")[0] is not None
    again, _ = send_to_worker(home, "run-1")
    assert again is not None and again["ahead"] == 0
    release.set()
    _until(lambda: worker.health()["running"] is None and worker.health()["done"] == ["run-1"])
    assert executed == ["run-1"]


def test_an_unanswered_request_is_asked_again(served: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import runplatform.launcher as launcher

    home, worker, executed, release = served
    real = launcher.urllib.request.urlopen
    calls: list[int] = []

    def slow_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            real(*args, **kwargs).close()  # the worker got it, but the answer is "lost"
            raise TimeoutError("timed out")
        return real(*args, **kwargs)

    monkeypatch.setattr(launcher.urllib.request, "urlopen", slow_once)
    taken, why = send_to_worker(home, "run-1")
    assert taken is not None and why == "" and len(calls) == 2
    release.set()
    _until(lambda: worker.health()["done"] == ["run-1"])
    assert executed == ["run-1"]


def test_a_run_started_elsewhere_is_not_executed_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher gave up on the worker and started the run in a process of its own."""
    import sys

    import dagster as dg
    from dagster import DagsterRun, DagsterRunStatus

    import runplatform.run_worker as run_worker
    from resources.dagster_private import (
        JobPythonOrigin,
        ModuleCodePointer,
        RepositoryPythonOrigin,
    )

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    loaded: list[Any] = []
    monkeypatch.setattr(run_worker, "_reload_code", loaded.append)
    origin = JobPythonOrigin("some_job", RepositoryPythonOrigin(
        sys.executable, ModuleCodePointer("pipelines.definitions", "defs", working_directory=None)))
    with dg.DagsterInstance.get() as instance:
        run = instance.add_run(DagsterRun(job_name="some_job", job_code_origin=origin,
                                          status=DagsterRunStatus.STARTED))
        run_worker.execute_run(run.run_id)
        assert loaded == []
        after = instance.get_run_by_id(run.run_id)
        assert after is not None and after.status == DagsterRunStatus.STARTED


def test_the_jvm_temporary_files_go_under_the_workers_scratch(tmp_path: Path) -> None:
    scratch = scratch_dir(tmp_path, 4242)
    user = SparkSettings(extra_conf={"spark.driver.extraJavaOptions": "-Dx=1"})
    got = user.with_tmpdir(scratch).extra_conf["spark.driver.extraJavaOptions"]
    assert got == f"-Dx=1 -Djava.io.tmpdir={scratch}"   # the user's options kept
    assert scratch.is_dir()
    remote = SparkSettings(remote="sc://127.0.0.1:15002")
    assert remote.with_tmpdir(scratch) == remote     # a Connect server's JVM is not ours


def test_scratch_of_a_killed_worker_is_swept_a_live_ones_kept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead, live = scratch_dir(tmp_path, int(gone.stdout)), scratch_dir(tmp_path, os.getpid())
    for path in (dead, live):
        (path / "blockmgr-1").mkdir(parents=True)
    sweep_scratch(tmp_path)
    assert not dead.exists() and (live / "blockmgr-1").is_dir()


@pytest.mark.parametrize(("name", "reader", "default", "least", "good", "bad"), [
    ("TJ_WARM_UP_BACKFILLS", "backfills_from_env", "DEFAULT_BACKFILLS", 0,
     (("1", 1), (" 0 ", 0), ("12", 12)), ("-1", "two", "1.5")),
    # A sample needs at least one wave to backfill.
    ("TJ_WARM_UP_WAVES", "waves_from_env", "DEFAULT_WAVES", 1,
     (("1", 1), (" 2 ", 2)), ("0", "-1", "three")),
], ids=["backfills", "waves"])
def test_the_warm_ups_size_comes_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, name: str, reader: str, default: str, least: int,
        good: tuple[tuple[str, int], ...], bad: tuple[str, ...]) -> None:
    from runplatform import warm_up

    read = getattr(warm_up, reader)
    monkeypatch.delenv(name, raising=False)
    assert read() == getattr(warm_up, default)
    for text, wanted in good:
        monkeypatch.setenv(name, text)
        assert read() == wanted
    for text in bad:
        monkeypatch.setenv(name, text)
        with pytest.raises(SystemExit,
                           match=rf"{name}: .*\({least} or more\), got '{re.escape(text)}'"):
            read()
