"""One writer per join (issue 8): two processes against the same join never interleave.

The writers run in two other processes with a SparkSession each (tests/processes.py: warm,
kept across tests) against one lake. The interleavings that lost or doubled rows without a
writer lease are forced with the runtime's failpoints (`joins.incremental.hooks`): a backfill
paused after computing while a micro-batch wants to commit (the micro-batch says when it starts
waiting for the lease), a micro-batch paused after planning while another plans, and a backfill
whose process is stopped (SIGSTOP) until its lease expires and a micro-batch takes over. Every
test ends by comparing the output with what a serial run must produce: every consumed stream
record exactly once, joined with the table version valid at its time.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from joins.lake import LeaseLostError
from joins.operators.stream_table_join.backfill import backfill
from joins.operators.stream_table_join.spark_replay import REPLAY_COLUMNS, ReplayLake
from tests.spark.test_stream_table_backfill import ideal
from tests.spark.test_stream_table_incremental import records_of, spec_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAY = 86_400_000
CONFIG = {"join": "left", "table": {"versioned": True, "history_retention_ms": 10 * DAY},
          "grace_ms": 10, "late": "join"}
DAYS = ["1970-01-02", "1970-01-03"]


def _stream(n: int, first_ts: int) -> list[dict[str, Any]]:
    return [{"side": "stream", "key": k % 3, "value": f"s{first_ts + k}", "ts": first_ts + k}
            for k in range(n)]


TABLE = [{"side": "table", "key": k, "value": f"t{k}", "ts": DAY} for k in range(3)]
# A first wave whose stream records leave the grace buffer in the first batch (the last record
# moves stream time past them), so that a backfill has output rows to recompute.
FIRST = [*TABLE, *_stream(5, DAY + 100), *_stream(1, DAY + 500)]


# ---- what the two processes run (module level: sent by reference) -------------------------------


def _replay(root: str) -> ReplayLake:
    from joins.spark import get_spark

    return ReplayLake(get_spark(), spec_of(CONFIG), root, create=False)


def _backfill(replay: ReplayLake, **lease: float) -> Any:
    return backfill(replay.spark, replay.spec, replay.paths, stream_source=replay.stream_source,
                    table_source=replay.table_source, days=DAYS, columns=REPLAY_COLUMNS, **lease)


def _rounds_worker(root: str, role: str, rounds: int, start: Any, end: Any, out: Any) -> None:
    replay = _replay(root)
    for _ in range(rounds):
        start.wait()
        try:
            if role == "backfill":
                _backfill(replay, wait_s=300)
                out.put((role, "ok"))
            else:
                report = replay.run(wait_s=300)
                out.put((role, "skipped" if report.skipped else f"batch {report.batch_id}"))
        except Exception as exc:  # reported to the test, which fails on it
            out.put((role, f"error {exc!r}"))
        end.wait()


def _at(point: str, event: Any, release: Any = None) -> None:
    """At the failpoint `point`: say so with `event`, then wait for `release` (if any)."""
    from joins.incremental import hooks

    def reached() -> None:
        event.set()
        if release is not None:
            release.wait(300)

    hooks.install(point, reached)


def _writer(root: str, role: str, out: Any, lease: dict[str, float],
            points: list[tuple[str, Any, Any]]) -> None:
    """A backfill (role "backfill") or a micro-batch, its outcome put on `out`; `points`:
    failpoints to announce (and pause at), each (point, event, release or None)."""
    from joins.incremental import hooks

    replay = _replay(root)
    for point, event, release in points:
        _at(point, event, release)
    try:
        if role == "backfill":
            r = _backfill(replay, **lease)
            out.put((role, f"ok commit {r.commit_version}"))
        else:
            report = replay.run(**lease)
            out.put((role, report.skip_reason if report.skipped else f"batch {report.batch_id}"))
    except LeaseLostError as exc:
        out.put((role, f"lease lost: {exc}"))
    except Exception as exc:
        out.put((role, f"error {exc!r}"))
    finally:
        hooks.clear()  # the process serves the next test


# ---- helpers -------------------------------------------------------------------------------------


def _drain(out: Any) -> list[tuple[str, str]]:
    got = []
    while not out.empty():
        got.append(out.get())
    return got


def assert_like_a_serial_run(replay: ReplayLake, raw: list[dict[str, Any]], *, flushed: int) -> None:
    """Every stream record but the last `flushed` (still buffered) is in the output exactly
    once, joined as of its ts (the table never changes after the first wave: batch cuts and
    backfills cannot change a row)."""
    from pyspark.sql import functions as F

    from joins import lake

    out = lake.read_delta(replay.spark, replay.paths.output)
    dup = out.groupBy("_seq").count().where(F.col("count") > 1).count()
    assert dup == 0, "an output row is there twice"
    got = sorted((r for *_l, r in replay.ordered_rows()), key=lambda item: item["ts"])
    want = ideal(raw)[:-flushed] if flushed else ideal(raw)
    assert got == sorted(want, key=lambda item: item["ts"])


def _flush(replay: ReplayLake, raw: list[dict[str, Any]], batch: int) -> int:
    """Land one far-later record (stream time moves past grace) and run what is left."""
    last = [{"side": "stream", "key": 0, "value": "flush", "ts": DAY + 10 * DAY // 10 * 9}]
    replay.land(records_of(last, start=len(raw)), batch)
    raw.extend(last)
    while not replay.run().skipped:
        pass
    return 1


def _with_a_late_version(spark: Any, tmp_path: Path, *,
                         key: int) -> tuple[str, ReplayLake, list[dict[str, Any]]]:
    """A join with one batch run, then a table version that arrives late (a backfill will
    correct the rows it answers) and more stream records for the next micro-batch."""
    root = str(tmp_path / "lake")
    replay = ReplayLake(spark, spec_of(CONFIG), root)
    raw = list(FIRST)
    replay.land(records_of(raw), 1)
    replay.run()
    late = [{"side": "table", "key": key, "value": f"t{key}-late", "ts": DAY + 50}]
    more = _stream(4, DAY + 600)
    replay.land(records_of(late + more, start=len(raw)), 2)
    return root, replay, [*raw, *late, *more]


# ---- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("other", ["microbatch", "backfill"])
def test_two_processes_many_rounds_equal_a_serial_run(spark: Any, tmp_path: Path, other: str,
                                                      two_processes: Any) -> None:
    root = str(tmp_path / "lake")
    replay = ReplayLake(spark, spec_of(CONFIG), root)
    raw: list[dict[str, Any]] = list(TABLE)
    replay.land(records_of(TABLE), 1)
    replay.run()
    rounds = 4
    start, end, out = two_processes.barrier(3), two_processes.barrier(3), two_processes.queue()
    a, b = two_processes
    calls = [a.call(_rounds_worker, root, "microbatch", rounds, start, end, out),
             b.call(_rounds_worker, root, other, rounds, start, end, out)]
    for n in range(rounds):
        wave = _stream(7, DAY + 1000 * n)
        replay.land(records_of(wave, start=len(raw)), n + 2)
        raw.extend(wave)
        start.wait()
        end.wait()
    for call in calls:
        call.result()
    outcomes = _drain(out)
    assert not [o for o in outcomes if o[1].startswith("error")], outcomes
    assert_like_a_serial_run(replay, raw, flushed=_flush(replay, raw, rounds + 2))


def test_a_microbatch_waits_for_a_paused_backfill(spark: Any, tmp_path: Path,
                                                  two_processes: Any) -> None:
    """Without a lease, a micro-batch committing while a backfill computed lost its rows to the
    backfill's partition replace. Now the micro-batch waits, and commits after it."""
    root, replay, raw = _with_a_late_version(spark, tmp_path, key=1)
    paused, release, waiting, out = (two_processes.event(), two_processes.event(),
                                     two_processes.event(), two_processes.queue())
    a, b = two_processes
    bf = a.call(_writer, root, "backfill", out, {}, [("backfill computed", paused, release)])
    assert paused.wait(300)
    mb = b.call(_writer, root, "microbatch", out, {"wait_s": 300},
                [("waiting for the lease", waiting, None)])
    assert waiting.wait(300), "the micro-batch never found the backfill's lease"
    assert not mb.done() and out.empty(), "the micro-batch ran while the backfill held the join"
    release.set()
    bf.result()
    mb.result()
    outcomes = dict(_drain(out))
    assert outcomes["backfill"].startswith("ok commit") and outcomes["backfill"] != "ok commit None"
    assert outcomes["microbatch"].startswith("batch")
    flushed = _flush(replay, raw, 3)
    # The late version changed the answer of earlier rows; after a final backfill every row is
    # as a serial run with all versions known says.
    _backfill(replay)
    assert_like_a_serial_run(replay, raw, flushed=flushed)


def test_a_second_microbatch_does_not_run_beside_a_planned_one(spark: Any, tmp_path: Path,
                                                                two_processes: Any) -> None:
    """Without a lease, two micro-batches planning at once ran under one batch id (rows twice,
    or lost). Now the second waits; with a short wait it gives up, saying why."""
    root = str(tmp_path / "lake")
    replay = ReplayLake(spark, spec_of(CONFIG), root)
    raw = [*TABLE, *_stream(6, DAY + 100)]
    replay.land(records_of(raw), 1)
    paused, release, out = two_processes.event(), two_processes.event(), two_processes.queue()
    a, b = two_processes
    first = a.call(_writer, root, "first", out, {}, [("planned", paused, release)])
    assert paused.wait(300)
    b.call(_writer, root, "second", out, {"wait_s": 2}, []).result()
    release.set()
    first.result()
    outcomes = dict(_drain(out))
    assert outcomes["first"] == "batch 0"
    assert outcomes["second"].startswith("another writer of this join is running: "
                                         "stream_table_join micro-batch by ")
    assert_like_a_serial_run(replay, raw, flushed=_flush(replay, raw, 2))


def test_a_stopped_backfill_whose_lease_expired_commits_nothing(spark: Any, tmp_path: Path,
                                                                two_processes: Any) -> None:
    """A backfill process stopped (a GC pause, SIGSTOP) past its lease: a micro-batch waits for
    the lease, takes it over once it expired and commits; the backfill, resumed, finds its lease
    lost and commits nothing, so no row of the micro-batch is replaced away."""
    root, replay, raw = _with_a_late_version(spark, tmp_path, key=2)
    paused, release, waiting, out = (two_processes.event(), two_processes.event(),
                                     two_processes.event(), two_processes.queue())
    a, b = two_processes
    bf = a.call(_writer, root, "backfill", out, {"lease_ttl_s": 3.0},
                [("backfill computed", paused, release)])
    assert paused.wait(300)
    os.kill(a.pid, signal.SIGSTOP)
    try:
        # Nobody renews the backfill's lease now: the micro-batch finds it held, waits until it
        # expires (3 s) and takes it over.
        b.call(_writer, root, "microbatch", out, {"wait_s": 60},
               [("waiting for the lease", waiting, None)]).result()
    finally:
        os.kill(a.pid, signal.SIGCONT)
    assert waiting.is_set(), "the micro-batch never saw the backfill's lease held"
    release.set()
    bf.result()
    outcomes = dict(_drain(out))
    assert outcomes["microbatch"].startswith("batch")
    assert outcomes["backfill"].startswith("lease lost"), outcomes
    flushed = _flush(replay, raw, 3)
    _backfill(replay)
    assert_like_a_serial_run(replay, raw, flushed=flushed)
