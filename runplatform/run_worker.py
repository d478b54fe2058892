"""The warm run worker (`python -m runplatform.run_worker`): runs launched from the UI execute in
one long-lived process that holds a warm SparkSession and has Dagster and the code loaded.

Dagster's default run launcher starts a process per run: an interpreter, Dagster's import, the
code location's load and a Spark connection, about 3 s before the first step, and then every
Spark call of the run crosses Spark Connect. `./tj dev` starts this worker instead; the
instance's run launcher (`runplatform.launcher.WarmWorkerRunLauncher`) hands it each run by id
over 127.0.0.1, and falls back to a process per run when no worker is up.

- One run at a time, in one thread, first come first run: Dagster captures a step's output by
  redirecting the process's file descriptors, so two runs in one process would mix their
  compute logs. A run launched while another executes waits in the worker (it shows as
  starting), which on a small machine costs less than a process with a cold JVM of its own.
- Each run reloads the code location's module first: its event-day partitions fit the data
  when it loads (`pipelines.partitions`), and the data moves on.
- Terminating a run from the UI stops it at its next event (a step boundary), not inside a
  Spark job.
- The worker writes `DAGSTER_HOME/run-worker.json` (its address and pid) once it listens and
  removes it when it stops; the launcher reads it at every launch.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import queue
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

WORKER_FILE = "run-worker.json"


class RunWorker:
    """The worker's state: the run it executes, the runs waiting (first come, first run), and
    whether it is warm. `execute` runs one run by id (`execute_run`; tests pass their own)."""

    def __init__(self, execute: Callable[[str], None] | None = None) -> None:
        self.execute = execute or execute_run
        self.lock = threading.Lock()
        self.waiting: queue.Queue[str] = queue.Queue()
        self.queued: list[str] = []
        self.running: str | None = None
        self.warm = False
        self.warm_error: str | None = None
        self.done: list[str] = []
        threading.Thread(target=self._loop, name="runs", daemon=True).start()

    def submit(self, run_id: str) -> int:
        """Queue a run; its place in the line (0: it starts now). Submitting a run the worker
        already has queues nothing: a launcher that did not hear the first answer asks again."""
        with self.lock:
            if run_id == self.running or run_id in self.done:
                return 0
            if run_id in self.queued:
                return self.queued.index(run_id) + (self.running is not None)
            ahead = len(self.queued) + (self.running is not None)
            self.queued.append(run_id)
        self.waiting.put(run_id)
        return ahead

    def _loop(self) -> None:
        while True:
            run_id = self.waiting.get()
            with self.lock:
                self.queued.remove(run_id)
                self.running = run_id
            try:
                self.execute(run_id)
            except Exception:  # reported to the run's event log by Dagster; the worker goes on
                traceback.print_exc()
            finally:
                with self.lock:
                    self.running = None
                    self.done.append(run_id)

    def health(self) -> dict[str, Any]:
        with self.lock:
            return {"pid": os.getpid(), "warm": self.warm, "warm_error": self.warm_error,
                    "running": self.running, "queued": list(self.queued),
                    "done": list(self.done[-20:])}


def execute_run(run_id: str) -> None:
    """Execute a launched run in this process, as `dagster api execute_run` would in its own."""
    import dagster as dg
    from dagster import DagsterRunStatus

    from resources.dagster_private import (
        EngineEventData,
        core_execute_run,
        recon_job_from_origin,
    )

    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        if run is None or run.job_code_origin is None:
            raise RuntimeError(f"run {run_id} is unknown to the instance at {instance.root_directory}")
        if run.status not in (DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING):
            # Another process started it (a launcher that gave up on this worker): never twice.
            print(f"run {run_id} is {run.status.value}: not executed again", file=sys.stderr,
                  flush=True)
            return
        try:
            _reload_code(run.job_code_origin)
            recon_job = recon_job_from_origin(run.job_code_origin)  # type: ignore[arg-type]
        except Exception as exc:  # the run would stay "starting" forever: fail it, saying why
            instance.report_run_failed(run, message=(
                f"The warm run worker (pid {os.getpid()}) could not load the code location: "
                f"{type(exc).__name__}: {exc}"))
            raise
        instance.report_engine_event(
            f"Started in the warm run worker (pid {os.getpid()}): no new process, the worker's "
            "SparkSession", run, EngineEventData.in_process(os.getpid()))
        events = core_execute_run(recon_job, run, instance, inject_env_vars=True)
        canceling = None
        try:
            for _ in events:
                current = instance.get_run_by_id(run_id)
                if current is not None and current.status == DagsterRunStatus.CANCELING:
                    canceling = current
                    break
        finally:
            events.close()
        if canceling is not None:
            instance.report_run_canceled(canceling, message="Terminated from the UI: the warm "
                                         "run worker stopped the run after its last event")


def _reload_code(origin: Any) -> None:
    """Import the run's code location module afresh (its partitions fit the data as of now)."""
    pointer = origin.repository_origin.code_pointer
    name = getattr(pointer, "module", None)
    if name and name in sys.modules:
        importlib.reload(sys.modules[name])


class _Handler(BaseHTTPRequestHandler):
    worker: RunWorker

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._reply(200, self.worker.health())
        else:
            self._reply(404, {"error": f"no such path {self.path}"})

    def do_POST(self) -> None:
        if self.path != "/runs":
            self._reply(404, {"error": f"no such path {self.path}"})
            return
        try:
            run_id = str(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["run_id"])
        except (ValueError, KeyError, TypeError) as exc:
            self._reply(400, {"error": f"expected a JSON body with run_id: {exc}"})
            return
        ahead = self.worker.submit(run_id)
        self._reply(202, {"pid": os.getpid(), "run_id": run_id, "ahead": ahead})

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per launch would drown the UI's own log


def _warm_up(worker: RunWorker, backfills: int, waves: int) -> None:
    from runplatform.warm_up import warm_up

    started = time.monotonic()
    try:
        times = warm_up(backfills, waves)
    except Exception as exc:  # the worker serves cold rather than not at all
        worker.warm_error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
        return
    worker.warm = True
    print(f"run worker warm in {time.monotonic() - started:.0f} s (sample backfills: "
          f"{', '.join(f'{t:.1f} s' for t in times)})", file=sys.stderr, flush=True)


def serve(home: Path, *, port: int = 0, warm_up: bool = True) -> None:
    """Serve until SIGTERM/SIGINT; `DAGSTER_HOME/run-worker.json` says where, while serving."""
    import warnings

    from joins.spark import get_spark
    from joins.spark.session import SparkSettings

    warnings.filterwarnings("ignore")  # Dagster's beta/preview notes, once per run
    from runplatform.warm_up import backfills_from_env, waves_from_env

    # A bad value stops the worker before its JVM starts.
    backfills, waves = backfills_from_env(), waves_from_env()
    sweep_scratch(home)
    scratch = scratch_dir(home, os.getpid())
    # The JVM starts before the first run needs it.
    spark = get_spark(SparkSettings.from_env().with_tmpdir(scratch))
    worker = RunWorker()
    handler = type("Handler", (_Handler,), {"worker": worker})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    address = home / WORKER_FILE
    staged = address.with_suffix(".tmp")
    staged.write_text(json.dumps({"url": f"http://127.0.0.1:{server.server_port}",
                                  "pid": os.getpid()}))
    staged.replace(address)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    if warm_up and os.environ.get("TJ_WARM_UP", "1") != "0":
        threading.Thread(target=_warm_up, args=(worker, backfills, waves), name="warm-up",
                         daemon=True).start()
    else:
        worker.warm = True
    print(f"run worker (pid {os.getpid()}) listening on 127.0.0.1:{server.server_port}",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            if json.loads(address.read_text()).get("pid") == os.getpid():
                address.unlink()
        server.server_close()
        # A JVM stopped with its group runs Spark's directory removal in shutdown hooks that
        # may not finish; the worker stops Spark itself and removes what is left.
        with contextlib.suppress(Exception):  # the JVM may be going already
            spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def scratch_dir(home: Path, pid: int) -> Path:
    """The temporary directory of the worker `pid`'s JVM (its java.io.tmpdir: Spark's block
    manager, files and artifacts), removed when the worker stops (and by `./tj dev` after it,
    and by the next worker if it was killed)."""
    return home / "tmp" / f"run-worker-{pid}"


def sweep_scratch(home: Path) -> None:
    """Remove the scratch directories of workers no longer running (killed before they could)."""
    for path in (home / "tmp").glob("run-worker-*"):
        pid = path.name.removeprefix("run-worker-")
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    from runplatform.instance import dagster_home

    serve(dagster_home(), port=int(os.environ.get("TJ_RUN_WORKER_PORT", "0")),
          warm_up=os.environ.get("TJ_WARM_UP", "1") != "0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
