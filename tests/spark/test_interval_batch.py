"""The interval join's batch form (issue 12, item 1) against a brute-force nested loop filtered
by the condition, plus the unmatched rows of outer sides; and its skew-proof time bins."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.errors import ConfigError
from joins.operators.interval_join.bins import BIN, binned, time_window
from joins.operators.interval_join.columns import JoinLayout
from joins.operators.interval_join.spark_batch import interval_join
from tests.budget import examples
from tests.reference.test_interval_join import (
    COLUMNS,
    JOINS,
    interval_conditions,
    nested_loop,
    side_rows,
    spec,
)

pytestmark = pytest.mark.spark

Row = dict[str, Any]
SCHEMA = "id string, t long, k string, v long"


def frame(spark: Any, rows: list[Row]) -> Any:
    return spark.createDataFrame([(r["id"], r["t"], r["k"], r["v"]) for r in rows], SCHEMA)


def spark_rows(spark: Any, join: str, condition: str, lefts: list[Row], rights: list[Row],
               **kwargs: Any) -> Counter[str]:
    the_spec = spec(condition, join=join, left=COLUMNS, right=COLUMNS)
    result = interval_join(frame(spark, lefts), frame(spark, rights), the_spec, **kwargs)
    try:
        got = result.rows.collect()
    finally:
        result.release()
    names = {"l": ("l_id", "l_t", "l_k", "l_v"), "r": ("r_id", "r_t", "r_k", "r_v")}

    def side(row: Any, key: str) -> Row | None:
        if row["_kind"] == ("right" if key == "l" else "left"):
            return None
        return dict(zip(COLUMNS, (row[n] for n in names[key]), strict=True))
    return Counter(json.dumps({"l": side(r, "l"), "r": side(r, "r")}, sort_keys=True) for r in got)


@settings(max_examples=examples(25))
@given(join=st.sampled_from(JOINS), condition=interval_conditions(), lefts=side_rows("a"),
       rights=side_rows("b"), bin_ms=st.sampled_from([None, 1, 2, 5]))
def test_batch_form_equals_the_nested_loop(
        spark: Any, join: str, condition: tuple[str, Callable[[Row, Row], bool], bool, bool],
        lefts: list[Row], rights: list[Row], bin_ms: int | None) -> None:
    text, holds, _, _ = condition
    assert spark_rows(spark, join, text, lefts, rights, bin_ms=bin_ms) == \
        nested_loop(join, lefts, rights, holds)


def test_ids_may_come_from_the_inputs_and_bounds_in_one_direction_use_keys_only(spark: Any) -> None:
    lefts = [{"id": "a", "t": 5, "k": "x", "v": 1}, {"id": "b", "t": 50, "k": "x", "v": 1}]
    rights = [{"id": "c", "t": 3, "k": "x", "v": 1}, {"id": "d", "t": 9, "k": "y", "v": 1}]
    # l.t >= r.t - 2 and r.t >= l.t - 2 through different expressions of the same pair.
    text = "l.t - r.t >= -2 AND r.t - l.t >= -2 AND l.k = r.k"
    got = spark_rows(spark, "full", text, lefts, rights)
    assert got == nested_loop("full", lefts, rights,
                              lambda a, b: abs(a["t"] - b["t"]) <= 2 and a["k"] == b["k"])


def test_a_hot_key_spreads_over_many_bins(spark: Any) -> None:
    the_spec = spec("l.t BETWEEN r.t - 3 AND r.t + 3 AND l.k = r.k", left=COLUMNS, right=COLUMNS)
    layout = JoinLayout.of(the_spec).with_kinds("left", frame(spark, []).schema)
    window = time_window(layout)
    assert window is not None and (window.a, window.b, window.width) == (3, 3, 6)
    hot = frame(spark, [{"id": str(n), "t": n, "k": "hot", "v": 1} for n in range(600)])
    single = binned(hot.selectExpr("id", "t as l_t"), window, "left", replicate=False)
    assert single.select(BIN).distinct().count() == 100
    copies = binned(hot.selectExpr("id", "t as r_t"), window, "right", replicate=True)
    assert copies.count() <= 2 * 600


def test_keys_of_different_types_never_match(spark: Any) -> None:
    the_spec = spec("l.t = r.t AND l.k = r.k", join="full", left=("t", "k"), right=("t", "k"))
    left = spark.createDataFrame([(1, 1)], "t long, k long")
    right = spark.createDataFrame([(1, "1")], "t long, k string")
    rows = interval_join(left, right, the_spec)
    try:
        kinds = sorted(r["_kind"] for r in rows.rows.collect())
    finally:
        rows.release()
    assert kinds == ["left", "right"]


def test_a_comparison_of_a_string_with_a_number_is_refused_before_running(spark: Any) -> None:
    the_spec = spec("l.t BETWEEN r.t - 1 AND r.t + 1 AND r.v > 'a'", left=("t",), right=("t", "v"))
    left = spark.createDataFrame([], "t long")
    right = spark.createDataFrame([], "t long, v long")
    with pytest.raises(ConfigError, match=r"cannot compare a long with a string"):
        interval_join(left, right, the_spec)


@pytest.mark.parametrize("join", ["left", "right", "full"])
def test_an_outer_row_matching_in_one_bin_is_not_padded_from_the_next(spark: Any, join: str) -> None:
    # Bins of width 2 for a window of 2: the right row at t=3 reaches bins 0 and 1 and matches
    # only the left row at t=2 (bin 1). Were the kept side the replicated one, its copy in the
    # bin without a match would come out null-padded beside the pair.
    lefts = [{"id": "a", "t": 2, "k": "x", "v": 1}, {"id": "b", "t": 9, "k": "x", "v": 1}]
    rights = [{"id": "c", "t": 3, "k": "x", "v": 1}, {"id": "d", "t": 1, "k": "x", "v": 1}]
    text = "l.t BETWEEN r.t - 1 AND r.t + 1 AND l.k = r.k"
    assert spark_rows(spark, join, text, lefts, rights, bin_ms=2) == \
        nested_loop(join, lefts, rights, lambda a, b: abs(a["t"] - b["t"]) <= 1 and a["k"] == b["k"])


def test_candidate_pairs_refuses_to_keep_the_replicated_side(spark: Any) -> None:
    from pyspark.sql import functions as F

    from joins.operators.interval_join.bins import TimeWindow, candidate_pairs

    left = spark.createDataFrame([(1,)], "l_t long")
    right = spark.createDataFrame([(1,)], "r_t long")
    window = TimeWindow("l_t", "r_t", a=1, b=1, width=2)
    for how, replicate in (("left_outer", "left"), ("right_anti", "right")):
        kept = how.split("_")[0]
        with pytest.raises(ValueError, match=f"keeps the {kept} rows, which must not be the replicated"):
            candidate_pairs(left, right, keys=[], window=window, condition=F.lit(True),
                            replicate=replicate, how=how)
