"""Backfill of the stream-table join (issue 4, item 3): whole event days recomputed from the full
versioned history, replaced in one commit, the difference to the micro-batch rows reported.

With grace covering the data's disorder a backfill changes nothing; late table data (a version
that arrived after the stream records it answers were joined) and late stream records are what
a backfill corrects, and it says so. Records still in the grace buffer are left to the
micro-batches, so backfills and micro-batches never emit a record twice.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.core.store import VersionedStore
from joins.errors import ConfigError
from joins.incremental import BatchStateError
from joins.operators.stream_table_join.backfill import BackfillReport, backfill
from joins.operators.stream_table_join.spark_replay import REPLAY_COLUMNS, ReplayLake
from tests.budget import spark_examples
from tests.spark.test_stream_table_incremental import records_of, spec_of

pytestmark = pytest.mark.spark

DAY = 86_400_000
D1, D2, D3 = "1970-01-02", "1970-01-03", "1970-01-04"
VERSIONED = {"join": "left", "table": {"versioned": True, "history_retention_ms": 10 * DAY},
             "grace_ms": DAY // 2, "late": "join"}


def run_backfill(replay: ReplayLake, days: list[str]) -> BackfillReport:
    return backfill(replay.spark, replay.spec, replay.paths, stream_source=replay.stream_source,
                    table_source=replay.table_source, days=days, columns=REPLAY_COLUMNS)


def output_items(replay: ReplayLake) -> list[Any]:
    """Output rows as items (lineage left out), sorted by arrival."""
    return [item for *_lineage, item in sorted(replay.ordered_rows(), key=lambda t: t[3])
            if "quarantined" not in item]


def ideal(raw: list[dict[str, Any]]) -> list[Any]:
    """What the join should say with every table version known: each stream record (by
    arrival) joined as of its ts against all table records (no retention limit)."""
    table = VersionedStore(history_retention_ms=1 << 62)
    for r in raw:
        if r["side"] == "table":
            table.put(r["key"], r["value"], r["ts"])
    out = []
    for r in raw:
        if r["side"] == "stream" and r["value"] is not None:
            found = table.get(r["key"], r["ts"])
            out.append({"key": r["key"], "value": [r["value"], None if found is None else found.value],
                        "ts": r["ts"]})
    return out


TABLE_FIRST = [
    {"side": "table", "key": 1, "value": "a", "ts": 0},
    {"side": "table", "key": 2, "value": "b", "ts": 0},
    {"side": "table", "key": 1, "value": "a2", "ts": DAY + 10},
]
STREAM = [  # out of order within grace (half a day)
    {"side": "stream", "key": 1, "value": "s1", "ts": DAY + 5},
    {"side": "stream", "key": 2, "value": "s2", "ts": DAY + 1},
    {"side": "stream", "key": 1, "value": "s3", "ts": DAY + 20},
    {"side": "stream", "key": 1, "value": "s4", "ts": 2 * DAY + 5},
    {"side": "stream", "key": 2, "value": "s5", "ts": 2 * DAY + 1},
    {"side": "stream", "key": 2, "value": "s6", "ts": 3 * DAY},  # stays buffered
]


def test_backfill_after_microbatches_changes_nothing(spark: Any, tmp_path: Path) -> None:
    replay = ReplayLake(spark, spec_of(VERSIONED), str(tmp_path))
    raw = TABLE_FIRST + STREAM
    records = records_of(raw)
    replay.land(records[:6], 1)
    replay.run()
    replay.land(records[6:], 2)
    replay.run()
    before = output_items(replay)
    report = run_backfill(replay, [D1, D2, D3])
    assert report.agrees and report.commit_version is None
    assert report.excluded_buffered == 1  # s6: a micro-batch emits it once stream time passes it
    assert [(d.day, d.rows_before, d.rows_after) for d in report.per_day] == \
        [(D1, 3, 3), (D2, 2, 2), (D3, 0, 0)]
    assert output_items(replay) == before == ideal(raw)[:5]

    # Stream time moves on: s6 is emitted by the micro-batch, exactly once.
    replay.land(records_of([{"side": "stream", "key": 1, "value": "s7", "ts": 4 * DAY}],
                           start=len(raw)), 3)
    replay.run()
    seqs = Counter(t[3] for t in replay.ordered_rows())
    assert seqs[len(raw) - 1] == 1 and max(seqs.values()) == 1
    assert run_backfill(replay, [D3]).agrees


def test_backfill_corrects_late_table_data_and_reports_it(spark: Any, tmp_path: Path) -> None:
    replay = ReplayLake(spark, spec_of(VERSIONED), str(tmp_path))
    raw = TABLE_FIRST + STREAM[:5] + [{"side": "stream", "key": 9, "value": "z", "ts": 5 * DAY}]
    replay.land(records_of(raw), 1)
    replay.run()
    # A version valid from DAY + 2 arrives after s1 (DAY + 5) and s3 were joined with "a"/"a2"
    # (s3 at DAY + 20 still sees a2): one row of day 1 changes; day 2 does not.
    late = [{"side": "table", "key": 1, "value": "late", "ts": DAY + 2}]
    replay.land(records_of(late, start=len(raw)), 2)
    assert replay.run().rows_out == 0  # the micro-batch cannot revise what it emitted
    report = run_backfill(replay, [D1, D2])
    assert (report.added, report.removed, report.changed) == (0, 0, 1)
    assert [(d.day, d.changed) for d in report.per_day] == [(D1, 1), (D2, 0)]
    assert report.commit_version is not None
    assert sorted(map(repr, output_items(replay))) == sorted(
        map(repr, [i for i in ideal(raw + late) if i["ts"] < 3 * DAY]))


def test_backfill_joins_records_that_were_late_for_the_stream(spark: Any, tmp_path: Path) -> None:
    config = {**VERSIONED, "late": "quarantine"}
    replay = ReplayLake(spark, spec_of(config), str(tmp_path))
    raw = [*TABLE_FIRST, STREAM[3], STREAM[0],  # s1 (day 1) arrives a day late: quarantined
           {"side": "stream", "key": 9, "value": "z", "ts": 5 * DAY}]
    replay.land(records_of(raw), 1)
    assert replay.run().quarantined == 1
    report = run_backfill(replay, [D1])
    assert (report.added, report.removed, report.changed) == (1, 0, 0)
    assert [i["value"] for i in output_items(replay)] == [["s4", "a2"], ["s1", "a"]]


def test_backfill_refuses_what_it_cannot_do(spark: Any, tmp_path: Path) -> None:
    unversioned = ReplayLake(spark, spec_of({"join": "left", "table": {"versioned": False}}),
                             str(tmp_path / "u"))
    with pytest.raises(ConfigError, match="versioned table"):
        run_backfill(unversioned, [D1])
    replay = ReplayLake(spark, spec_of(VERSIONED), str(tmp_path / "v"))
    with pytest.raises(ConfigError, match="not a date"):
        run_backfill(replay, ["yesterday"])
    nothing = run_backfill(replay, [D1])  # no micro-batch yet: every record is still ahead
    assert nothing.last_batch_id is None and nothing.rows_after == 0 and nothing.agrees
    replay.land(records_of(TABLE_FIRST + STREAM[:2]), 1)
    log_only = replay.paths.checkpoints
    from joins.incremental import BatchLog, BatchPlan, VersionRange

    BatchLog(log_only, "stream_table_join").write_plan(BatchPlan(
        batch_id=0, sources={"stream": replay.stream_source, "table": replay.table_source},
        ranges={"stream": VersionRange(0, 1), "table": VersionRange(0, 1)}, state_versions={}))
    with pytest.raises(BatchStateError, match="planned but not completed"):
        run_backfill(replay, [D1])


@st.composite
def orderly_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Table records first, then stream records out of order by at most the grace period: no
    late data of either kind, so the micro-batches see what a backfill sees."""
    grace = DAY // 4
    table = [{"side": "table", "key": draw(st.sampled_from(["a", "b"])),
              "value": draw(st.sampled_from(["x", "y", None])),
              "ts": draw(st.integers(0, 3 * DAY))} for _ in range(draw(st.integers(1, 4)))]
    base = sorted(draw(st.lists(st.integers(DAY, 3 * DAY), min_size=1, max_size=6)))
    jitter = [draw(st.integers(0, grace)) for _ in base]
    stream = [{"side": "stream", "key": draw(st.sampled_from(["a", "b", "c"])),
               "value": draw(st.sampled_from(["s", "t", None])), "ts": t - j}
              for t, j in zip(base, jitter, strict=True)]
    stream.append({"side": "stream", "key": "a", "value": "end", "ts": 6 * DAY})  # flushes the rest
    cut = draw(st.integers(1, len(stream)))
    return {"grace": grace, "table": table, "stream": stream, "cut": cut,
            "join": draw(st.sampled_from(["inner", "left"]))}


@pytest.mark.slow
@spark_examples(6)
@given(case=orderly_inputs())
def test_backfill_after_microbatches_agrees_on_random_orderly_data(
        spark: Any, tmp_path_factory: pytest.TempPathFactory, case: dict[str, Any]) -> None:
    config = {"join": case["join"], "table": {"versioned": True, "history_retention_ms": 10 * DAY},
              "grace_ms": case["grace"], "late": "drop"}
    replay = ReplayLake(spark, spec_of(config), str(tmp_path_factory.mktemp("bf")))
    records = records_of(case["table"] + case["stream"])
    split = len(case["table"]) + case["cut"]
    replay.land(records[:split], 1)
    replay.run()
    if split < len(records):
        replay.land(records[split:], 2)
        replay.run()
    before = output_items(replay)
    report = run_backfill(replay, ["1970-01-01", D1, D2, D3])
    assert report.agrees, report
    assert output_items(replay) == before


# ---- catch-up (issue 25): a batch covering more event time than the table's retention -----------

ONE_DAY_RETENTION = {"join": "inner", "table": {"versioned": True, "history_retention_ms": DAY},
                     "grace_ms": 30 * 60_000, "late": "quarantine"}


def three_days() -> list[dict[str, Any]]:
    """A rate per key and day, then orders through the three days (in order, 6 h apart)."""
    table = [{"side": "table", "key": k, "value": f"r{k}-{d}", "ts": d * DAY + k}
             for d in range(3) for k in (1, 2)]
    stream = [{"side": "stream", "key": 1 + n % 2, "value": f"o{n}", "ts": n * DAY // 4 + 60_000}
              for n in range(12)]
    return table + stream


def test_a_new_join_over_three_days_of_existing_data_equals_their_backfill(
        spark: Any, tmp_path: Path) -> None:
    # The inputs existed before the join: its first micro-batch takes all three days at once.
    # The table's updates are applied first, yet the orders of days 1 and 2 are joined as of
    # their ts, not lost to the one-day retention (before issue 25: 8 of 11 lost).
    replay = ReplayLake(spark, spec_of(ONE_DAY_RETENTION), str(tmp_path))
    raw = three_days()
    replay.land(records_of(raw), 1)
    report = replay.run()
    assert report.lookup_beyond_history_retention == 0 and report.quarantined == 0
    assert report.still_buffered == 1   # the last order waits for stream time to pass it by grace
    assert output_items(replay) == ideal(raw)[:11]
    backfilled = run_backfill(replay, ["1970-01-01", D1, "1970-01-03"])
    assert backfilled.agrees and backfilled.commit_version is None


def test_a_join_resumed_after_a_day_down_equals_one_that_never_stopped(
        spark: Any, tmp_path: Path) -> None:
    # Day by day in event-time order; the second run is down for day 2 and catches up on days
    # 2 and 3 in one batch.
    raw = three_days()
    days = [[r for r in raw if d * DAY <= r["ts"] < (d + 1) * DAY] for d in range(3)]
    order = [r for day in days for r in sorted(day, key=lambda r: (r["ts"], r["side"] != "table"))]
    records = records_of(order)
    cuts = [len(days[0]), len(days[0]) + len(days[1])]

    def run_in(batches: list[list[Any]], root: Path) -> list[Any]:
        replay = ReplayLake(spark, spec_of({**ONE_DAY_RETENTION, "join": "left"}), str(root))
        for n, batch in enumerate(batches, start=1):
            replay.land(batch, n)
            assert replay.run().lookup_beyond_history_retention == 0
        return output_items(replay)

    daily = run_in([records[:cuts[0]], records[cuts[0]:cuts[1]], records[cuts[1]:]],
                   tmp_path / "daily")
    resumed = run_in([records[:cuts[0]], records[cuts[0]:]], tmp_path / "resumed")
    assert resumed == daily == ideal(order)[:11]
