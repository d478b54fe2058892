"""`dagster dev` (the UI, the daemon that runs sensors, schedules and queued runs, and the code
server of `workspace.yaml`) as a child process on 127.0.0.1, and the few GraphQL calls the live
demo and the UI tests make: the UI's own API, the way its buttons call it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from joins.spark.server import free_port
from runplatform.dev import DAGSTER_DEV, process_tmpdir

REPO = Path(__file__).resolve().parents[1]


class DagsterServer:
    """`with DagsterServer(home=..., port=..., env=...) as server:` serves `workspace.yaml` with
    the instance at `home` until the block ends (the whole process group is stopped then).
    `daemon=False` serves the UI only (`dagster-webserver`)."""

    def __init__(self, *, home: Path, port: int | None = None, env: dict[str, str] | None = None,
                 daemon: bool = True, log: Path | None = None, ready_timeout_s: float = 300) -> None:
        self.home = home
        self.port = port or free_port()
        self.env = {**os.environ, **(env or {}), "DAGSTER_HOME": str(home),
                    "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                                  if p)}
        self.daemon = daemon
        self.log_path = log or home / ("dagster-dev.log" if daemon else "webserver.log")
        self.ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DagsterServer:
        webserver = str(Path(sys.executable).with_name("dagster-webserver"))
        cmd = [*(DAGSTER_DEV if self.daemon else [webserver]), "-w", str(REPO / "workspace.yaml"),
               "-h", "127.0.0.1", "-p", str(self.port)]
        # Its own TMPDIR, removed in stop(): `dagster dev` removes its workspace file's folder
        # only when it exits on its own, not when its group is killed after the grace.
        self._scratch = contextlib.ExitStack()
        tmpdir = self._scratch.enter_context(process_tmpdir())
        log = open(self.log_path, "ab")  # the child writes it; closed in stop()
        self._log = log
        self.proc = subprocess.Popen(cmd, cwd=REPO, env={**self.env, **tmpdir}, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dagster exited with {self.proc.returncode}: "
                                   f"{self.log_path.read_text()[-3000:]}")
            try:
                if self.location_loaded():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"dagster did not serve {self.url} within {self.ready_timeout_s:.0f} s")
            time.sleep(1)

    def location_loaded(self) -> bool:
        """The UI answers and the code location is loaded."""
        data = self.graphql("{ workspaceOrError { ... on Workspace { locationEntries { name "
                            "loadStatus } } } }", timeout=5)
        entries = data.get("workspaceOrError", {}).get("locationEntries") or []
        return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)

    def graphql(self, query: str, variables: dict[str, Any] | None = None, *,
                timeout: float = 60) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(f"{self.url}/graphql", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            answer = json.loads(resp.read())
        if answer.get("errors"):
            raise RuntimeError(f"GraphQL error: {answer['errors']}")
        return answer["data"]

    def reload_location(self, name: str) -> None:
        """What Deployment -> Reload does: the code location loads its definitions again."""
        data = self.graphql(
            "mutation($name: String!) { reloadRepositoryLocation(repositoryLocationName: $name) "
            "{ __typename ... on PythonError { message } } }", {"name": name})
        result = data["reloadRepositoryLocation"]
        if result["__typename"] == "PythonError":
            raise RuntimeError(f"reloading {name} failed: {result['message']}")
        deadline = time.monotonic() + self.ready_timeout_s
        while not self.location_loaded() and time.monotonic() < deadline:
            time.sleep(1)

    def stop(self) -> None:
        if self.proc is None:
            return
        # `dagster dev` stops its webserver, daemon and code server on SIGINT; then the group.
        for sig, wait in ((signal.SIGINT, 30), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None
        self._log.close()
        self._scratch.close()
