"""A local Spark Connect server started from pyspark's own scripts: one warm JVM that
short-lived processes attach to instead of each starting (and warming up) their own.

A Dagster run worker is a new process per run: with a local master every run started a JVM
(about 5 s) and ran its first jobs on a cold JIT. `./tj dev` and the live demo start this server
first and point the code location and the run workers at it (`TJ_SPARK_REMOTE`); the server
lives, warm, for the whole UI session. It binds 127.0.0.1 only and runs in its own process
group, stopped as a group.

    python -m joins.spark.server [--port 15002]    serve in the foreground until Ctrl-C
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from joins.errors import ConfigError
from joins.spark.session import SparkSettings

DEFAULT_PORT = 15002
START_TIMEOUT_S = 120.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port(preferred: int | None = None) -> int:
    """`preferred` if nothing listens there on 127.0.0.1, else a port the kernel picks."""
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # As servers bind (the JVM's and uvicorn's): a port a stopped server left in
            # TIME_WAIT is free to them, one something listens on is not.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise RuntimeError("no free port on 127.0.0.1")


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def connect_launcher() -> list[str]:
    """spark-submit of the Connect server in the foreground: what sbin/start-connect-server.sh
    --wait runs (pyspark 4.2's wheel ships the server's jar but not that script). Run it with
    SPARK_CONNECT_MODE=0 in the environment (CONNECT_ENV): the server itself is classic Spark."""
    return ["bash", str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS,
            "--name", "Spark Connect server"]


CONNECT_ENV = {"SPARK_CONNECT_MODE": "0"}
TXN_PLUGIN = "temporaljoins.TxnPlugin"


def plugin_conf() -> dict[str, str]:
    """The server's part of the Delta writer: its transactions run on the server, where the
    client's data is (joins/lake/txn_write.py). Empty without the engine's jar."""
    from joins.spark.jvm import jar_path

    if jar_path() is None:
        return {}
    return {"spark.connect.extensions.relation.classes": TXN_PLUGIN}


def server_command(port: int, settings: SparkSettings) -> list[str]:
    """pyspark's start script in the foreground, with the settings a local session would use
    (the engine's JVM classes on the classpath, with a local master the local file system
    without a shell, everything on 127.0.0.1)."""
    from joins.spark.session import local_fs_conf, session_jars

    conf = {k: v for k, v in settings.conf().items() if k != "spark.driver.memory"}
    jars = session_jars()
    conf.update(local_fs_conf(settings.master, jars, conf))
    conf.update({"spark.connect.grpc.binding.address": "127.0.0.1",
                 "spark.connect.grpc.binding.port": str(port),
                 "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    cmd = [*connect_launcher(), "--master", settings.master,
           "--driver-memory", settings.driver_memory]
    cmd += ["--jars", ",".join(str(p) for p in jars)]
    conf.update(plugin_conf())
    for key, value in sorted(conf.items()):
        cmd += ["--conf", f"{key}={value}"]
    return cmd


class LocalConnectServer:
    """`with LocalConnectServer(log_dir=...) as server:` a Connect server at `server.url` until
    the block ends. The port must be free: a server already listening there is another one."""

    def __init__(self, *, log_dir: Path, port: int = DEFAULT_PORT,
                 settings: SparkSettings | None = None,
                 start_timeout_s: float = START_TIMEOUT_S, stop_grace_s: float = 30.0) -> None:
        self.log_dir = log_dir
        self.port = port
        # The settings a local session of this process would take (TJ_SHUFFLE_PARTITIONS, ...).
        self.settings = settings or dataclasses.replace(SparkSettings.from_env(), remote=None)
        self.start_timeout_s = start_timeout_s
        self.stop_grace_s = stop_grace_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.scratch: Path | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / "spark-connect.log"

    def __enter__(self) -> LocalConnectServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        if listening(self.port):
            raise ConfigError(f"port {self.port} on 127.0.0.1 is taken (another Spark Connect "
                              f"server?); choose another with TJ_CONNECT_PORT, or point "
                              f"TJ_SPARK_REMOTE at the running server")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Removed after the stop: the server's JVM, stopped with its group, may not.
        self.scratch = Path(tempfile.mkdtemp(prefix="tmp-", dir=self.log_dir))
        settings = self.settings.with_tmpdir(self.scratch)
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOG_DIR": str(self.log_dir),
               "SPARK_PID_DIR": str(self.log_dir), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "PYARROW_IGNORE_TIMEZONE": "1", **CONNECT_ENV}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(server_command(self.port, settings), env=env,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while not listening(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not start on port {self.port} "
                                   f"(log {self.log_path}):\n{tail}")
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after `stop_grace_s`."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=self.stop_grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        finally:
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
                self.scratch = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joins.spark.server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=int(os.environ.get("TJ_CONNECT_PORT", DEFAULT_PORT)))
    parser.add_argument("--log-dir", type=Path, default=Path("var/spark-connect"))
    args = parser.parse_args(argv)

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    # The server runs in a session of its own: a SIGTERM to this launcher must stop it too.
    signal.signal(signal.SIGTERM, stop)
    with LocalConnectServer(log_dir=args.log_dir, port=args.port) as server:
        print(f"Spark Connect server at {server.url} (log {server.log_path}); Ctrl-C stops it",
              flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while server.proc is not None and server.proc.poll() is None:
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
