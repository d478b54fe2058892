"""The writer lease: one holder at a time, across processes; expiry, takeover, fencing."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest

from joins.lake import Lease, LeaseLostError, WriterBusyError
from joins.lake.process import gone_state, stat_fields


def test_acquire_release_and_busy(tmp_path: Path) -> None:
    path = str(tmp_path / "lease")
    a = Lease(path, purpose="micro-batch 1", owner="a")
    b = Lease(path, purpose="backfill", owner="b")
    a.acquire()
    with pytest.raises(WriterBusyError, match=r"micro-batch 1 by a") as busy:
        b.acquire(wait_s=0.3)
    assert busy.value.holder.owner == "a"
    a.check()
    a.release()
    b.acquire()
    with pytest.raises(LeaseLostError):
        a.check()


def test_expired_lease_is_taken_over_and_the_old_holder_is_fenced(tmp_path: Path) -> None:
    path = str(tmp_path / "lease")
    slow = Lease(path, purpose="micro-batch 7", owner="slow", ttl_s=0.2)
    slow.acquire()
    time.sleep(0.3)
    fresh = Lease(path, purpose="micro-batch 7 (re-run)", owner="fresh")
    fresh.acquire()
    with pytest.raises(LeaseLostError, match="no longer holds"):
        slow.check()
    slow.release()  # a fenced holder's release must not free the new holder's lease
    fresh.check()


def test_held_renews_in_the_background(tmp_path: Path) -> None:
    path = str(tmp_path / "lease")
    holder = Lease(path, purpose="long batch", owner="h", ttl_s=0.6)
    with holder.held():
        time.sleep(1.5)  # longer than the ttl: only renewals keep it
        holder.check()
        with pytest.raises(WriterBusyError):
            Lease(path, purpose="other", owner="o").acquire()
    Lease(path, purpose="other", owner="o").acquire()


def _contend(path: str, rounds: int, log: str, barrier: mp.synchronize.Barrier, who: int) -> None:
    barrier.wait()
    for n in range(rounds):
        lease = Lease(path, purpose=f"round {n}", owner=f"p{who}-{n}")
        lease.acquire(wait_s=30, poll_s=0.01)
        # Inside the lease: append "enter" and "exit" lines; an overlap shows as two enters.
        with open(log, "a") as f:
            f.write(f"enter {who}\n")
        time.sleep(0.005)
        with open(log, "a") as f:
            f.write(f"exit {who}\n")
        lease.release()


def test_two_processes_never_hold_the_lease_at_once(tmp_path: Path) -> None:
    path, log = str(tmp_path / "lease"), str(tmp_path / "log.txt")
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_contend, args=(path, 25, log, barrier, i)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = Path(log).read_text().split("\n")[:-1]
    assert len(lines) == 100
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("enter") and leave == "exit" + enter[len("enter"):]


def test_check_reads_the_log_only_near_expiry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nobody may take an unexpired lease, so a holder well inside its ttl checks without a
    read; close to expiry (a paused holder) it reads, and learns of a takeover."""
    path = str(tmp_path / "lease")
    holder = Lease(path, purpose="batch", owner="h", ttl_s=60)
    holder.acquire()
    reads: list[int] = []
    real = Lease.current

    def counted(self: Lease) -> tuple:
        reads.append(1)
        return real(self)

    monkeypatch.setattr(Lease, "current", counted)
    holder.check()
    assert reads == []
    # The clock moves to 5 s before expiry (inside the margin): now it reads.
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 55)
    holder.check()
    assert reads == [1]
    # Past expiry another writer takes it; the old holder's next check fails.
    monkeypatch.setattr(time, "time", lambda: now + 61)
    Lease(path, purpose="re-run", owner="o").acquire()
    with pytest.raises(LeaseLostError, match="no longer holds"):
        holder.check()


# ---- a holder that is provably gone (issue 25, point 6) ------------------------------------------


def _hold_and_wait(path: str, ready: str) -> None:
    Lease(path, purpose="ingest of orders", owner="doomed", ttl_s=300).acquire()
    Path(ready).write_text("held")
    time.sleep(600)


def _holder_process(tmp_path: Path) -> tuple[str, mp.process.BaseProcess]:
    path, ready = str(tmp_path / "lease"), tmp_path / "ready"
    proc = mp.get_context("spawn").Process(target=_hold_and_wait, args=(path, str(ready)))
    proc.start()
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    return path, proc


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_a_killed_holders_lease_is_taken_over_at_once(tmp_path: Path, reaped: bool,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """kill -9 leaves a lease with minutes to live; its process is gone, so the next writer
    takes it at once and says so (also before the parent reaped the dead child)."""
    path, proc = _holder_process(tmp_path)
    took: list[str] = []
    try:
        with pytest.raises(WriterBusyError, match="ingest of orders by doomed"):
            Lease(path, purpose="ingest of orders", owner="next").acquire()  # alive: it waits
        proc.kill()
        if reaped:
            proc.join(10)
        else:
            deadline = time.monotonic() + 10
            while (fields := stat_fields(proc.pid)) is not None and not gone_state(fields):
                assert time.monotonic() < deadline
                time.sleep(0.02)
        started = time.monotonic()
        after = Lease(path, purpose="ingest of orders", owner="next",
                      on_takeover=lambda _old, message: took.append(message))
        after.acquire()
        assert time.monotonic() - started < 5
        after.check()
    finally:
        proc.kill()
        proc.join(10)
    assert len(took) == 1 and f"its process {proc.pid} on this host" in took[0]
    assert "took over the lease of ingest of orders by doomed" in caplog.text


def test_a_holder_elsewhere_or_alive_is_never_provably_gone(tmp_path: Path) -> None:
    from joins.lake.lease import LeaseRecord
    from joins.lake.process import this_process

    me = this_process()
    assert me is not None   # Linux: every record names its process
    host, boot, ns, pid, started = me.split("|")
    record = LeaseRecord("o", "batch", 0, 1 << 62, process=me)
    assert record.holder_gone() is None                                       # this process
    other_host = LeaseRecord("o", "batch", 0, 1 << 62, process=f"elsewhere|{boot}|{ns}|{pid}|1")
    assert other_host.holder_gone() is None                                   # cannot tell
    assert LeaseRecord("o", "batch", 0, 1 << 62).holder_gone() is None        # an old record
    reused = LeaseRecord("o", "batch", 0, 1 << 62, process=f"{host}|{boot}|{ns}|{pid}|{started}0")
    assert "now runs another process" in (reused.holder_gone() or "")
