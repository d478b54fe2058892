"""`./tj dev --port N` (issue 25, point 5): the UI on the port asked for, and Ctrl-C or SIGTERM
stops every process it started (the UI's servers, the run worker and its JVM) within 10 s."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from joins.lake.process import gone_state, stat_fields
from joins.spark.server import free_port
from runplatform.dev import parse_args

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_a_taken_port_is_refused_before_anything_starts() -> None:
    import socket

    from demo.run import main as demo_main
    from runplatform.dev import main

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit, match=rf"port {port} on 127.0.0.1 is taken .*pass --port N"):
            main(["--port", str(port)])
        with pytest.raises(SystemExit, match=rf"^./tj demo --live: port {port} on 127.0.0.1 is taken"):
            demo_main(["--live", "--port", str(port)])


def test_port_argument() -> None:
    assert parse_args(["--port", "3111", "--verbose"]) == ("3111", ["--verbose"])
    assert parse_args(["--port=3112"]) == ("3112", [])
    with pytest.raises(SystemExit, match="--port needs a TCP port number, got 'x'"):
        parse_args(["-p", "x"])


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))  # field 4, the ppid
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and not gone_state(fields)


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_dev_serves_the_port_asked_for_and_stops_everything_within_10_s(tmp_path: Path,
                                                                       how: str) -> None:
    port = free_port()
    # The run worker warms up (a JVM running the demo's jobs on a sample) while the UI starts:
    # what a user stops is busy. `./tj dev` gets a TMPDIR of its own, short (a code server's
    # socket lies below it), where whatever a process it started leaves is found.
    tmpdir = Path(tempfile.mkdtemp(prefix="tj-test-"))
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"),
           "TJ_LAKE_ROOT": str(tmp_path / "lake"), "TMPDIR": str(tmpdir)}
    log = tmp_path / "dev.log"
    with open(log, "wb") as out:
        dev = subprocess.Popen([sys.executable, "-m", "runplatform.dev", "--port", str(port)],
                               cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert dev.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the UI did not answer in 240 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5):
                    break
            except OSError:
                time.sleep(1)
        started = descendants(dev.pid)
        assert len(started) >= 3   # dagster dev, its webserver and daemon, the run worker, ...
        # The worker's JVM keeps its temporary files where the stop removes them (its own
        # shutdown hooks may not finish: the whole group is stopped).
        scratch = tmp_path / "home" / "tmp"
        assert list(scratch.glob("run-worker-*/blockmgr-*")), "the run worker's JVM wrote its " \
            f"temporary files elsewhere: {sorted(p.name for p in scratch.glob('*/*'))}"
        stopped_at = time.monotonic()
        if how == "SIGTERM":
            dev.send_signal(signal.SIGTERM)
        else:   # the terminal sends SIGINT to its foreground group
            os.killpg(dev.pid, signal.SIGINT)
        dev.wait(timeout=15)
        while any(alive(p) for p in started) and time.monotonic() - stopped_at < 10:
            time.sleep(0.2)
        left = sorted(p for p in started if alive(p))
        assert not left, f"still running 10 s after {how}: {left}"
        assert time.monotonic() - stopped_at < 10
        assert not list(scratch.iterdir()), "the run worker's temporary files were left behind"
        left_in_tmp = sorted(str(p.relative_to(tmpdir)) for p in tmpdir.rglob("*"))
        assert not left_in_tmp, f"temporary files left behind: {left_in_tmp}"
        # The console carries no Dagster note about itself or the APIs the project uses on
        # purpose (`dagster dev` superseded by `dg dev`; beta parameters: assets/beta_apis.py).
        console = log.read_text(errors="replace")
        notes = [line for line in console.splitlines()
                 if "SupersessionWarning" in line or "BetaWarning" in line or "PreviewWarning" in line]
        assert not notes, notes
    finally:
        # On a failure above, stop it as a user would (it stops the groups it started), then
        # kill whatever is left: `dagster dev` and the run worker lead groups of their own,
        # which a SIGKILL to this one would leave running.
        left = descendants(dev.pid)
        if dev.poll() is None:
            dev.send_signal(signal.SIGTERM)
            try:
                dev.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(dev.pid, signal.SIGKILL)
                dev.wait()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmpdir, ignore_errors=True)
