"""A standalone Spark cluster (one master, one worker) and a Spark Connect server on 127.0.0.1,
started from the installed pyspark's own scripts (`bin/spark-class`, `bin/spark-submit`):
no Spark download, no Maven. Each daemon leads its own process group (start_new_session) and is
stopped by signalling that group, which also ends what it started (a worker's executors).

What the daemons hand on to the Python side of a job (why the environment below matters):
- Executors inherit the worker's environment, and the driver names the interpreter its Python
  workers run (PYSPARK_PYTHON, here the venv's), so `PYTHONPATH` on the worker makes this
  checkout's `joins` importable where the tasks run.
- A Connect server is the driver of its sessions: its PYSPARK_PYTHON names the interpreter of
  the UDFs that clients send.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from joins.spark.delta_jars import DELTA_CONF
from joins.spark.server import CONNECT_ENV, connect_launcher, free_port, listening, plugin_conf
from joins.spark.session import session_jars

REPO = Path(__file__).resolve().parents[2]
WORKER_CORES = 4       # logical: two applications (a driver, a Connect server) fit at once
APP_CORES = 2          # spark.deploy.defaultCores: what an application takes by default
WORKER_MEMORY = "3g"   # three executors of the default 1g
START_TIMEOUT_S = 180  # a loaded 2-core machine starts a JVM slowly


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def java_missing() -> str | None:
    """Why the daemons cannot start here (None: they can)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return None
    if shutil.which("java") is None:
        return "no java on PATH or in JAVA_HOME (Spark needs Java 17+)"
    return None


def python_env(**extra: str) -> dict[str, str]:
    """This process's environment with this checkout first on PYTHONPATH and this interpreter
    as the one Spark's Python workers run."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", **extra}


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}; its log "
                                 f"({self.log}):\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM to the daemon's process group, SIGKILL after 30 s."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        # The group may outlive its leader (an executor the worker started): it got the same
        # SIGTERM and gets the same grace to run its shutdown hooks, which remove its
        # directories in /tmp (killed at once, it left them there), then it is ended too.
        deadline = time.monotonic() + 30
        with contextlib.suppress(ProcessLookupError):
            while time.monotonic() < deadline:
                os.killpg(self.proc.pid, 0)
                time.sleep(0.2)
            os.killpg(self.proc.pid, signal.SIGKILL)


def start_daemon(name: str, cmd: list[str], log_dir: Path, env: dict[str, str]) -> Daemon:
    log = log_dir / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=log_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return Daemon(name, proc, log)


def wait_until(what: str, ready: Any, daemons: list[Daemon], timeout_s: float = START_TIMEOUT_S) -> Any:
    """Poll `ready()` until it returns a true value; fail naming `what` with the daemons' logs."""
    deadline = time.monotonic() + timeout_s
    while True:
        for d in daemons:
            d.check_alive()
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {d.name} ({d.log}):\n{d.tail(2000)}" for d in daemons)
            raise AssertionError(f"{what} not ready within {timeout_s:.0f} s\n{logs}")
        time.sleep(0.5)


def _master_status(web_url: str) -> dict[str, Any] | None:
    """The master's JSON view (workers, applications), or None while it does not answer.

    Once, on a loaded machine, the starting master answered `/json/` with its HTML page (why is
    not established): an answer that is not JSON means "not yet", as no answer does; a master
    that never gives JSON fails the wait with its log.
    """
    try:
        with urllib.request.urlopen(f"{web_url}/json/", timeout=20) as resp:
            return dict(json.load(resp))
    except (OSError, ValueError):
        return None


@dataclass
class Standalone:
    """A running master and worker: `url` for drivers."""

    url: str
    web_url: str
    work_dir: Path
    master: Daemon
    worker: Daemon

    def apps(self, name: str) -> list[dict[str, Any]]:
        """The master's active and completed applications called `name`."""
        s = _master_status(self.web_url) or {}
        return [a for a in s.get("activeapps", []) + s.get("completedapps", []) if a.get("name") == name]

    def executor_logs(self, app_id: str) -> list[Path]:
        """stderr of every executor the worker ran for `app_id` (work/<app>/<executor>/stderr)."""
        return sorted(self.work_dir.glob(f"{app_id}/*/stderr"))

    def stop(self) -> None:
        self.worker.stop()
        self.master.stop()


def start_standalone(base: Path) -> Standalone:
    """A master and one worker on 127.0.0.1 (the master on 7077 unless that is taken)."""
    home = spark_home()
    spark_class = str(home / "bin" / "spark-class")
    port, web, worker_web = free_port(7077), free_port(), free_port()
    url, web_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}"
    work = base / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = python_env(SPARK_HOME=str(home), SPARK_DAEMON_MEMORY="512m",
                     SPARK_MASTER_OPTS=f"-Dspark.deploy.defaultCores={APP_CORES}")
    master = start_daemon("master", ["bash", spark_class, "org.apache.spark.deploy.master.Master",
                                     "--host", "127.0.0.1", "--port", str(port),
                                     "--webui-port", str(web)], base, env)
    started = [master]
    try:
        wait_until("the master's web UI", lambda: _master_status(web_url), started)
        worker = start_daemon(
            "worker", ["bash", spark_class, "org.apache.spark.deploy.worker.Worker", url,
                       "--host", "127.0.0.1", "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
                       "--work-dir", str(work), "--webui-port", str(worker_web)], base, env)
        started.append(worker)
        wait_until("a registered worker", lambda: any(
            w.get("state") == "ALIVE" for w in (_master_status(web_url) or {}).get("workers", [])),
            started)
    except BaseException:
        for daemon in reversed(started):
            daemon.stop()
        raise
    return Standalone(url, web_url, work, master, worker)


@dataclass
class ConnectServer:
    url: str
    daemon: Daemon

    def stop(self) -> None:
        self.daemon.stop()


def start_connect(base: Path, master_url: str) -> ConnectServer:
    """A Spark Connect server (joins.spark.server.connect_launcher, in the foreground) whose
    sessions run on `master_url`."""
    home = spark_home()
    port = free_port(15002)
    logs = base / "connect-logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = python_env(SPARK_HOME=str(home), SPARK_LOG_DIR=str(logs), SPARK_PID_DIR=str(logs),
                     **CONNECT_ENV)
    cmd = [*connect_launcher(), "--master", master_url,
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
           "--conf", "spark.ui.enabled=false",
           # delta-spark and the engine's classes, as every session the project starts has them
           "--jars", ",".join(str(p) for p in session_jars()),
           *(arg for key, value in {**DELTA_CONF, **plugin_conf()}.items()
             for arg in ("--conf", f"{key}={value}"))]
    daemon = start_daemon("connect", cmd, base, env)
    try:
        wait_until("the Spark Connect server", lambda: listening(port), [daemon])
    except BaseException:
        daemon.stop()
        raise
    return ConnectServer(f"sc://127.0.0.1:{port}", daemon)
