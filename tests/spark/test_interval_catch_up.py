"""Catch-up equals history for the interval join (issue 25, point 1): a join added over days of
existing events, or a pipeline resumed after a day down, takes days at once in one micro-batch.
As a pipeline runs it (derived watermarks: max event time seen - the side's lag, after the
batch's rows), that batch must write what day-by-day batches write and what the backfill of
those days computes, and count nothing late for orderly data."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from joins import lake
from joins.core.operator import Item
from joins.operators.interval_join import IntervalJoinProcessor
from joins.operators.interval_join.backfill import backfill
from joins.operators.interval_join.columns import EVENT_DATE, KIND, SEQ, SIDE_SEQ
from joins.operators.interval_join.report import IntervalBatchReport
from tests.budget import spark_examples
from tests.reference.test_interval_join import JOINS
from tests.spark.test_interval_pipeline_mode import (
    COLUMNS,
    TYPES,
    EventTables,
    Row,
    reference_batch,
    spec_of,
    tables_rows,
)

pytestmark = pytest.mark.spark

T0 = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
H, DAY, HALF = 3_600_000, 86_400_000, 1_800_000
CONDITION = f"l.t BETWEEN r.t - {2 * H} AND r.t + {3 * H} AND l.k = r.k"
LAG: dict[str, int | None] = {"left": H, "right": 2 * H}
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
Batch = tuple[list[Row], list[Row]]


def day_rows(d: int) -> Batch:
    """Per day: pairs inside the day, a left row at 23:00 joining the next day's right row at
    00:30 and a right row at 22:00 joining the next day's left row at 01:00 (the bound, 3 h),
    so pairs cross the days a catch-up batch merges; a left 6:00 b and a right 9:00 b are 3 h
    apart the wrong way: unmatched, null-padded once evicted."""
    start = T0 + d * DAY
    lefts = [{"id": f"a{d}-{h}", "t": start + h * H, "k": k, "v": 0}
             for h, k in ((1, "a"), (6, "b"), (12, "a"), (23, "a"))]
    rights = [{"id": f"b{d}-{m}", "t": start + m * HALF, "k": k, "v": 0}
              for m, k in ((1, "a"), (4, "a"), (18, "b"), (28, "a"), (44, "a"))]
    return lefts, rights


# Later rows (keys that match nothing) push the watermarks far past day 3: every row of the
# three days is then evicted (outer rows emitted) and the days are complete for a backfill.
FLUSH: Batch = ([{"id": "az", "t": T0 + 5 * DAY, "k": "zl", "v": 0}],
                [{"id": "bz", "t": T0 + 5 * DAY, "k": "zr", "v": 0}])
INPUTS = [*(day_rows(d) for d in range(3)), FLUSH]
COMPARED = (KIND, SIDE_SEQ["left"], SIDE_SEQ["right"], SEQ, EVENT_DATE)


def output_rows(tables: EventTables) -> list[tuple[Any, ...]]:
    """The joined and null-padded rows with their identities, without what depends on the
    batching (batch id, emission order, watermark rows)."""
    path = f"{tables.root}/output"
    columns = (*tables.layout.output_columns(), *COMPARED)
    rows = lake.read_delta(tables.spark, path).where(f"{KIND} != 'watermark'").collect()
    return sorted(tuple(str(r[c]) for c in columns) for r in rows)


def run_in(spark: Any, root: Path, batches: list[list[int]],
           ) -> tuple[EventTables, list[IntervalBatchReport], list[list[tuple[Any, ...]]]]:
    """INPUTS landed day by day (so every run numbers rows alike) and a micro-batch run after
    each group of days in `batches`; the reports and the output after each batch."""
    tables = EventTables(spark, root, spec_of(CONDITION, "full", COLUMNS, COLUMNS), TYPES, LAG)
    reports, snapshots = [], []
    for days in batches:
        for d in days:
            tables.land("left", INPUTS[d][0])
            tables.land("right", INPUTS[d][1])
        reports.append(tables.run())
        snapshots.append(output_rows(tables))
    return tables, reports, snapshots


@pytest.fixture(scope="module")
def daily(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[list[tuple[Any, ...]]]:
    """The pipeline that never stopped: one batch per day, then the flush."""
    return run_in(spark, tmp_path_factory.mktemp("daily"), [[0], [1], [2], [3]])[2]


def assert_orderly(report: IntervalBatchReport) -> None:
    assert not report.skipped
    assert report.late_dropped == report.late_quarantined == report.invalid == {"left": 0, "right": 0}
    assert report.quarantined == 0


def kinds(rows: list[tuple[Any, ...]]) -> Counter[str]:
    return Counter(r[-len(COMPARED)] for r in rows)


def test_a_join_added_over_three_days_equals_their_backfill_and_the_daily_run(
        spark: Any, tmp_path: Path, daily: list[list[tuple[Any, ...]]]) -> None:
    tables, reports, after = run_in(spark, tmp_path, [[0, 1, 2], [3]])
    assert reports[0].rows_in == {"left": 12, "right": 15}
    assert_orderly(reports[0])
    # No watermark precedes it: every row is buffered, none judged against an old bound.
    assert reports[0].out_of_bounds == {"left": 0, "right": 0}
    assert sorted(reports[0].event_days_touched) == DAYS
    assert after[0] == daily[2] and after[1] == daily[3]
    # 4 pairs a day, 4 across midnight; one unmatched row per side and day.
    assert kinds(after[1]) == {"joined": 16, "left": 3, "right": 3}
    check = backfill(spark, tables.step, tables.root, left_source=tables.paths["left"],
                     right_source=tables.paths["right"], days=DAYS, dry_run=True)
    assert check.agrees, check.per_day
    assert [d.rows_after for d in check.per_day] == [7, 8, 7]


def test_a_pipeline_resumed_after_a_day_down_equals_one_that_never_stopped(
        spark: Any, tmp_path: Path, daily: list[list[tuple[Any, ...]]]) -> None:
    _, reports, after = run_in(spark, tmp_path, [[0], [1, 2], [3]])
    assert_orderly(reports[1])
    assert after == [daily[0], daily[2], daily[3]]


@st.composite
def orderly_history(draw: st.DrawFn) -> dict[str, Any]:
    """Both sides' rows in arrival order over several times the bounds and lags (half hours):
    each row at most its side's lag below the side's max so far, so no cut makes one late. Last
    come rows days later that match nothing: every earlier row is evicted, its days complete."""
    lag = {s: draw(st.integers(0, 6)) * HALF for s in ("left", "right")}
    clock = T0 + draw(st.integers(0, 47)) * HALF  # where the day boundaries fall varies
    arrivals: list[tuple[int, str, Row]] = []
    for side in ("left", "right"):
        base = clock
        for n in range(draw(st.integers(1, 5))):
            base += draw(st.integers(0, 12)) * HALF
            t = base - draw(st.integers(0, lag[side] // HALF)) * HALF
            arrivals.append((base, side, {"id": f"{side[0]}{n}", "t": t,
                                          "k": draw(st.sampled_from("ab")), "v": 0}))
    arrivals.sort(key=lambda a: (a[0], a[1]))  # a stable merge keeps each side's order
    first, last = (min(r["t"] for *_, r in arrivals) // DAY, max(r["t"] for *_, r in arrivals) // DAY)
    flush = (last + 3) * DAY
    history = [(s, r) for _, s, r in arrivals] + [("left", {"id": "lz", "t": flush, "k": "zl", "v": 0}),
                                                 ("right", {"id": "rz", "t": flush, "k": "zr", "v": 0})]
    n = len(history)
    big = draw(st.integers((n + 1) // 2, n))  # the catch-up batch: at least half of it
    start = draw(st.integers(0, n - big))
    extra = draw(st.sampled_from([*range(start + 1), *range(start + big, n + 1)]))
    cuts = sorted({0, start, start + big, extra, n})
    return {"lag": lag, "join": draw(st.sampled_from(JOINS)), "keyed": draw(st.booleans()),
            "bounds": (draw(st.integers(0, 6)) * HALF, draw(st.integers(0, 6)) * HALF),
            "history": history, "batches": [history[a:b] for a, b in pairwise(cuts) if a < b],
            "days": [(dt.date(1970, 1, 1) + dt.timedelta(days=d)).isoformat()
                     for d in range(first, last + 1)]}


# No shrinking: each example runs several Spark micro-batches; a failure prints its example.
@pytest.mark.slow
@settings(spark_examples(4), phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(case=orderly_history())
def test_random_orderly_history_cut_with_one_large_batch_equals_the_reference_and_backfill(
        spark: Any, tmp_path_factory: pytest.TempPathFactory, case: dict[str, Any]) -> None:
    a, b = case["bounds"]
    condition = f"l.t BETWEEN r.t - {a} AND r.t + {b}" + (" AND l.k = r.k" if case["keyed"] else "")
    spec = spec_of(condition, case["join"], COLUMNS, COLUMNS)
    tables = EventTables(spark, tmp_path_factory.mktemp("prop"), spec, TYPES, case["lag"])
    got: list[Item] = []
    for batch in case["batches"]:
        for side in ("left", "right"):
            tables.land(side, [r for s, r in batch if s == side])
        report = tables.run()
        assert_orderly(report)
        assert report.batch_id is not None
        got.extend(tables.items(report.batch_id))
    # History: the reference fed one row per batch (a watermark after each) in arrival order.
    processor = IntervalJoinProcessor(spec)
    seen: dict[tuple[str, str], int] = {}
    want: list[Item] = []
    for side, row in case["history"]:
        one: Batch = ([row], []) if side == "left" else ([], [row])
        want.extend(reference_batch(processor, *one, case["lag"], seen, {"left": ["t"], "right": ["t"]}))
    assert processor.metrics["late_rows_dropped"] == 0
    rows = [i for i in got if "row" in i]
    assert tables_rows(rows) == tables_rows([i for i in want if "row" in i])
    check = backfill(spark, tables.step, tables.root, left_source=tables.paths["left"],
                     right_source=tables.paths["right"], days=case["days"], dry_run=True)
    assert check.agrees, check.per_day
    # The flush rows join each other when the condition has no key: their day is not backfilled.
    assert sum(d.rows_after for d in check.per_day) == sum(
        all(side is None or side["id"] not in ("lz", "rz") for side in i["row"].values()) for i in rows)
