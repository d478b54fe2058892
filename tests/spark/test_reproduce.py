"""Reproducing past output (issue 29, point 3; joins.reproduce): a micro-batch re-run from its
plan, and an event day as the output held it at a commit, recomputed from the inputs pinned to
the versions that run read; both agree with the output after a compaction of the versioned
table and after a backfill that changed the day, and a vacuumed input version is named."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from joins import lake
from joins.incremental import Source
from joins.operators.stream_table_join.backfill import StreamTableBatchForm
from joins.operators.stream_table_join.spark_incremental import StreamTableJoinStep
from joins.operators.stream_table_join.spark_replay import REPLAY_COLUMNS, ReplayLake, _layout
from joins.reproduce import ReproduceError, Runtime, reproduce_batch, reproduce_day
from joins.versioned.spark_store import compact
from tests.spark.test_interval_backfill import ran  # noqa: F401  (a fixture)
from tests.spark.test_stream_table_backfill import D1, D2, DAY, STREAM, TABLE_FIRST, VERSIONED, run_backfill
from tests.spark.test_stream_table_incremental import records_of, spec_of

pytestmark = pytest.mark.spark

RAW = TABLE_FIRST + STREAM


def runtime(replay: ReplayLake) -> Runtime:
    step = StreamTableJoinStep(replay.spec, REPLAY_COLUMNS)
    return Runtime("replay", step, StreamTableBatchForm(step), replay.paths,
                   {"stream": Source(replay.stream_source), "table": Source(replay.table_source)})


def two_batches(spark: Any, tmp_path: Path) -> ReplayLake:
    replay = ReplayLake(spark, spec_of(VERSIONED), str(tmp_path))
    records = records_of(RAW)
    replay.land(records[:6], 1)
    replay.run()
    replay.land(records[6:], 2)
    replay.run()
    return replay


def test_batches_and_days_reproduce_after_a_compaction(spark: Any, tmp_path: Path) -> None:
    replay = two_batches(spark, tmp_path)
    rt = runtime(replay)
    # A version older than the retention bound goes: the table's files are rewritten.
    replay.land(records_of([{"side": "table", "key": 2, "value": "b2", "ts": 40 * DAY}],
                           start=len(RAW)), 3)
    assert compact(spark, replay.table_source, _layout(replay.spec)).commit is not None
    rows = 0
    for batch in (0, 1):   # batch ids start at 0
        got = reproduce_batch(spark, rt, batch)
        assert got.agrees, got.text()
        assert got.rows_output == got.rows_recomputed
        rows += got.rows_output
    assert rows == 5   # s6 is still buffered
    day = reproduce_day(spark, rt, dt.date.fromisoformat(D1))
    assert day.agrees and day.rows_output == 3, day.text()
    assert "no difference" in day.text()
    empty = reproduce_day(spark, rt, dt.date(2030, 1, 1))
    assert empty.agrees and empty.rows_output == 0, empty.text()
    assert empty.pins["written by"] == "no commit (no micro-batch or backfill wrote that day)"


def test_a_day_a_backfill_changed_reproduces_before_and_after(spark: Any, tmp_path: Path) -> None:
    replay = ReplayLake(spark, spec_of(VERSIONED), str(tmp_path))
    raw = TABLE_FIRST + STREAM[:5] + [{"side": "stream", "key": 9, "value": "z", "ts": 5 * DAY}]
    replay.land(records_of(raw), 1)
    replay.run()
    before = lake.delta_version(replay.paths.output)
    replay.land(records_of([{"side": "table", "key": 1, "value": "late", "ts": DAY + 2}],
                           start=len(raw)), 2)
    replay.run()
    assert run_backfill(replay, [D1, D2]).changed == 1
    rt, day = runtime(replay), dt.date.fromisoformat(D1)
    now = reproduce_day(spark, rt, day)
    assert now.agrees and "backfill" in now.pins["written by"], now.text()
    assert before is not None
    then = reproduce_day(spark, rt, day, before)
    # Before the backfill the day is batch 0's rows, re-run from its plan: the late version
    # batch 1 consumed (which a batch form pinned at batch 1 would use) is not in them.
    assert then.agrees and then.pins["written by"] == "micro-batch(es) 0", then.text()
    assert now.pins["written by"].startswith("the backfill of output commit 1")
    assert now.pins["table"] == lake.delta_version(replay.table_source)
    batch = reproduce_batch(spark, rt, 0)
    assert batch.agrees, batch.text()


def test_a_vacuumed_input_version_is_named(spark: Any, tmp_path: Path) -> None:
    replay = two_batches(spark, tmp_path)
    rt = runtime(replay)
    replay.land(records_of([{"side": "table", "key": 2, "value": "b2", "ts": 40 * DAY}],
                           start=len(RAW)), 3)
    compact(spark, replay.table_source, _layout(replay.spec))
    DeltaTable(replay.table_source).vacuum(retention_hours=0, enforce_retention_duration=False,
                                           dry_run=False)
    with pytest.raises(ReproduceError, match=r"the table source .* version \d+ cannot be read any "
                                             r"more: .* removed \(a vacuum\)"):
        reproduce_batch(spark, rt, 0)


def test_unknown_batch_and_commit_are_named(spark: Any, tmp_path: Path) -> None:
    replay = two_batches(spark, tmp_path)
    rt = runtime(replay)
    with pytest.raises(ReproduceError, match=r"batch 9 does not exist \(batches 0\.\.1 completed\)"):
        reproduce_batch(spark, rt, 9)
    with pytest.raises(ReproduceError, match=r"there is no commit 99"):
        reproduce_day(spark, rt, dt.date.fromisoformat(D1), 99)


def test_the_interval_join_reproduces_batches_and_a_backfilled_day(spark: Any, ran: Any) -> None:  # noqa: F811
    """`ran` (test_interval_backfill): two batches, the second dropping a late row."""
    from joins.incremental import JoinRoot
    from joins.operators.interval_join.backfill import IntervalBatchForm
    from tests.spark.test_interval_backfill import run_backfill as interval_backfill

    step = ran.step()
    rt = Runtime("interval", step, IntervalBatchForm(step), JoinRoot(ran.join_root),
                 {side: Source(path) for side, path in ran.paths.items()})
    for batch in (0, 1):
        assert reproduce_batch(spark, rt, batch).agrees
    before = lake.delta_version(f"{ran.join_root}/output")
    assert before is not None
    assert interval_backfill(ran, ["2026-01-01"], dry_run=False).added == 1   # the late row
    day = dt.date(2026, 1, 1)
    now, then = reproduce_day(spark, rt, day), reproduce_day(spark, rt, day, before)
    assert now.agrees and now.rows_output == 4, now.text()
    assert then.agrees and then.rows_output == 3, then.text()
