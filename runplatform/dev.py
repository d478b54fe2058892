"""`./tj dev` (`python -m runplatform.dev`): the Dagster UI, with a warm Spark for its runs.

Dagster starts a new process for every run; with a local master each of them started its own
JVM and ran its jobs on a cold JIT, so a two-day backfill launched from the UI cost several times
the same backfill in the demo's warm process. Here the warm run worker starts first
(`runplatform.run_worker`, its own process group): the instance's run launcher hands it every run,
which executes there on one SparkSession with no process start, after the demo's jobs ran once
on a sample to warm the JIT (`runplatform.warm_up`). It stops after the UI.

With `TJ_RUN_WORKER=0` each run gets its own process again, and those attach to one local Spark
Connect server started here instead (`joins.spark.server`, 127.0.0.1, via `TJ_SPARK_REMOTE`),
warmed the same way; not started when the user chose a Spark already (`TJ_SPARK_REMOTE` or
`TJ_SPARK_MASTER` set) or with `TJ_WARM_SPARK=0` (then each run starts a local session).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from runplatform.run_worker import scratch_dir

REPO = Path(__file__).resolve().parents[1]

# `dagster dev`, without the note its first line printed on every start: that the command is
# superseded by `dg dev` (dagster-dg-cli, a project layout of its own), which a user of
# `./tj dev` cannot act on. Only that note: the message filter matches its start.
DAGSTER_DEV = [sys.executable, "-W", "ignore:Function `dev_command` is superseded", "-m",
               "dagster", "dev"]


# How long each process group gets to stop on SIGTERM before it is killed: `./tj dev` is gone
# within 10 s of Ctrl-C or SIGTERM, whatever a server does with the signal.
STOP_GRACE_S = 3.0


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to the process group `proc` leads, then SIGKILL to whatever is left of it (a
    leader that stopped in time may leave children)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@dataclass
class WarmSpark:
    """What the UI's processes need to share one warm Spark (`env`: {} when the user chose a
    Spark already), and the warm-up running in the background, if any."""

    env: dict[str, str]
    warm_up: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    def wait_warm(self, timeout_s: float = 600) -> None:
        """Block until the warm-up finished; raise if it failed."""
        if self.warm_up is None:
            return
        if self.warm_up.wait(timeout=timeout_s) != 0:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log else ""
            raise RuntimeError(f"the Spark warm-up failed (log {self.log}):\n{tail}")


@contextlib.contextmanager
def warm_spark(log_dir: Path, *, warm_up: bool = True) -> Iterator[WarmSpark]:
    """A local Spark Connect server for the block, unless the user chose a Spark already or
    turned this off; with `warm_up`, the demo's jobs run on it once in the background
    (`runplatform.warm_up`, unless TJ_WARM_UP=0) so that the first runs a user launches find
    its JIT warm."""
    if os.environ.get("TJ_SPARK_REMOTE") or os.environ.get("TJ_SPARK_MASTER") \
            or os.environ.get("TJ_WARM_SPARK", "1") == "0":
        yield WarmSpark({})
        return
    from joins.spark.server import DEFAULT_PORT, LocalConnectServer, free_port

    port = free_port(int(os.environ.get("TJ_CONNECT_PORT", DEFAULT_PORT)))
    print(f"== starting a local Spark Connect server for the UI's runs on port {port} "
          f"(log {log_dir}; TJ_WARM_SPARK=0 runs each on its own session)", file=sys.stderr,
          flush=True)
    with LocalConnectServer(log_dir=log_dir, port=port, stop_grace_s=STOP_GRACE_S) as server:
        warm = WarmSpark({"TJ_SPARK_REMOTE": server.url})
        if warm_up and os.environ.get("TJ_WARM_UP", "1") != "0":
            warm.log = log_dir / "warm-up.log"
            with open(warm.log, "ab") as out:
                warm.warm_up = subprocess.Popen(
                    [sys.executable, "-m", "runplatform.warm_up"], cwd=REPO,
                    env={**os.environ, **warm.env}, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True)
            print(f"== warming it up with the demo's jobs on a sample, in the background "
                  f"(log {warm.log})", file=sys.stderr, flush=True)
        try:
            yield warm
        finally:
            if warm.warm_up is not None:
                stop_group(warm.warm_up, grace_s=0)


@contextlib.contextmanager
def process_tmpdir() -> Iterator[dict[str, str]]:
    """`TMPDIR` for the processes started in the block, removed after it. `dagster dev` keeps
    its workspace file (naming its code servers' sockets) in a temporary directory it removes
    only when it exits on its own: stopped with its process group, it left one in /tmp per
    start. The run worker gets it too (what its Python leaves if killed goes with it). Short
    on purpose: a code server's socket lies in it, and a socket's path must fit in 107 bytes."""
    scratch = tempfile.mkdtemp(prefix="tj-dev-")
    try:
        yield {"TMPDIR": scratch}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def run_worker(home: Path, *, warm_up: bool = True,
               env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes] | None]:
    """The warm run worker (`runplatform.run_worker`) for the block, in its own process group,
    unless TJ_RUN_WORKER=0; its log is `home/run-worker.log`. `warm_up`: it runs the demo's
    jobs on a sample first (unless TJ_WARM_UP=0). `env`: added to its environment."""
    if os.environ.get("TJ_RUN_WORKER", "1") == "0":
        yield None
        return
    log = home / "run-worker.log"
    print(f"== starting the warm run worker: the UI's runs execute in it, on one SparkSession "
          f"(log {log}; TJ_RUN_WORKER=0 starts a process per run)", file=sys.stderr, flush=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "runplatform.run_worker"], cwd=REPO,
                                env={**os.environ, "DAGSTER_HOME": str(home), **(env or {}),
                                     **({} if warm_up else {"TJ_WARM_UP": "0"})}, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        yield proc
    finally:
        stop_group(proc)
        # Killed after the grace, the worker could not remove its JVM's temporary files.
        shutil.rmtree(scratch_dir(home, proc.pid), ignore_errors=True)


def parse_args(argv: list[str]) -> tuple[str, list[str]]:
    """(port, the arguments passed on to `dagster dev`): `--port N` / `-p N` (default: PORT or
    3000)."""
    port, rest = os.environ.get("PORT", "3000"), []
    it = iter(argv)
    for arg in it:
        if arg in ("--port", "-p"):
            port = next(it, "")
        elif arg.startswith("--port="):
            port = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise SystemExit(f"./tj dev: --port needs a TCP port number, got {port!r}")
    return port, rest


def refuse_a_taken_port(port: str | int, command: str = "./tj dev") -> None:
    """Exit at once when `port` is taken: the run worker and Spark take half a minute to start,
    and `dagster dev` would only then fail to bind."""
    from joins.spark.server import free_port

    if free_port(int(port)) != int(port):
        raise SystemExit(f"{command}: port {port} on 127.0.0.1 is taken (another {command}?): "
                         "stop it, or pass --port N")


def main(argv: list[str] | None = None) -> int:
    port, args = parse_args(list(sys.argv[1:] if argv is None else argv))
    refuse_a_taken_port(port)
    from runplatform.instance import prepare_dagster_home

    home = prepare_dagster_home()
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signum)
        raise KeyboardInterrupt  # unwinds main, whose context managers stop every group

    # Ctrl-C (SIGINT to the terminal's group) and SIGTERM end the same way: dagster dev runs in a
    # process group of its own, stopped first, then the run worker's and the Connect server's.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with process_tmpdir() as tmpdir, run_worker(home, env=tmpdir) as worker, \
            (warm_spark(home / "spark-connect") if worker is None
             else contextlib.nullcontext(WarmSpark({}))) as warm:
        cmd = [*DAGSTER_DEV, "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", port,
               *args]
        proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **warm.env, **tmpdir},
                                start_new_session=True)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            print("== stopping the UI, the run worker and Spark", file=sys.stderr, flush=True)
            return 0
        finally:
            stop_group(proc)


if __name__ == "__main__":
    sys.exit(main())
