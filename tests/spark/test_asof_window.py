"""Where a held window starts on a large table (`joins.asof.window.window_start`): percentiles
from a fixed sample of the rows, and a start that still fits the budget. The windows' answers
are held equal to the whole history's by tests/spark/test_asof_held.py."""

from __future__ import annotations

from typing import Any

import pytest

from joins.asof.window import SAMPLE_EVERY, SAMPLE_MIN_ROWS, window_frame, window_start

pytestmark = pytest.mark.spark

ROWS, KEYS = 256_000, 16_000
SAMPLED = f"pmod(xxhash64(k, ts), {SAMPLE_EVERY}) = 0"


def _history(spark: Any) -> Any:
    # Unique ts, keys spread over the whole time range: each key's last version before any
    # start is one row.
    return spark.range(ROWS).selectExpr(f"id % {KEYS} AS k", "id * 1000 AS ts", "id AS arrival")


def test_a_large_table_takes_its_start_from_a_sample_and_fits(spark: Any) -> None:
    history = _history(spark)
    # 16k keys + an eighth of the rows (32k) fit 50k; a quarter (64k) does not.
    budget = 50_000
    full = window_start(history, key="k", ts="ts", budget=budget)
    sampled = window_start(history, key="k", ts="ts", budget=budget, rows=SAMPLE_MIN_ROWS)
    assert full is not None and sampled is not None
    # The percentile is a ts of a sampled row (the sketch saw no other) ...
    assert history.where(f"ts = {sampled} AND {SAMPLED}").count() == 1
    # ... near the full percentile (the 0.875 one: 12.5 % of the rows at or after it).
    after = history.where(f"ts >= {sampled}").count()
    assert abs(after - ROWS // 8) <= ROWS // 100, (after, full, sampled)
    held = window_frame(history, key="k", ts="ts", sequence=("arrival",), start=sampled).count()
    assert held <= budget * 1.02


def test_a_row_count_hint_that_samples_nothing_asks_again_without_sampling(spark: Any) -> None:
    # No row of this table is in the sample: the sampled percentiles are null. 1,000 keys and
    # half the rows fit 1,600.
    history = _history(spark).where(f"NOT ({SAMPLED})").limit(1_000)
    unhinted = window_start(history, key="k", ts="ts", budget=1_600)
    assert unhinted is not None
    assert window_start(history, key="k", ts="ts", budget=1_600, rows=SAMPLE_MIN_ROWS) == unhinted


def test_the_window_keeps_each_keys_latest_put_before_its_start(spark: Any) -> None:
    """Two puts of one (key, ts) before the start: the later sequence is the one kept."""
    history = spark.createDataFrame(
        [(1, 10, 1, "old"), (1, 10, 2, "new"), (1, 5, 3, "older ts"), (2, 30, 1, "after"),
         (2, 20, 1, "kept")], "k long, ts long, arrival long, val string")
    rows = window_frame(history, key="k", ts="ts", sequence=("arrival",), start=25).collect()
    assert sorted((r.k, r.ts, r.val) for r in rows) == [(1, 10, "new"), (2, 20, "kept"),
                                                        (2, 30, "after")]
