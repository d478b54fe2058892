"""The batch form's sweep (joins/operators/interval_join/sweep.py, temporaljoins.IntervalSweep):
which conditions take it, and that it gives the nested loop's rows, nulls included."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.operators.interval_join.bins import time_window
from joins.operators.interval_join.columns import JoinLayout
from joins.operators.interval_join.spark_batch import interval_join
from joins.operators.interval_join.sweep import sweep_key
from tests.budget import examples
from tests.reference.test_interval_join import COLUMNS, nested_loop, spec

pytestmark = pytest.mark.spark

Row = dict[str, Any]
SCHEMA = "id string, t long, k long, v long"


def layout_of(spark: Any, condition: str, schema: str = SCHEMA, join: str = "inner") -> JoinLayout:
    the_spec = spec(condition, join=join, left=COLUMNS, right=COLUMNS)
    frame = spark.createDataFrame([], schema)
    layout = JoinLayout.of(the_spec, inputs={s: {c: c for c in COLUMNS} for s in ("left", "right")})
    return layout.with_kinds("left", frame.schema).with_kinds("right", frame.schema)


@pytest.mark.parametrize("condition", [
    "l.k = r.k AND r.t BETWEEN l.t - 2 AND l.t + 3",
    "r.k = l.k AND l.t - r.t >= -1 AND l.t - r.t <= 4",
    "l.t > r.t - 3 AND l.k = r.k AND NOT (l.t > r.t + 2)",
    "l.k = r.k AND l.t = r.t + 1",
])
def test_one_integral_key_and_one_window_take_the_sweep(spark: Any, condition: str) -> None:
    layout = layout_of(spark, condition)
    assert sweep_key(layout, time_window(layout)) is not None


@pytest.mark.parametrize("condition, schema", [
    ("l.k = r.k AND r.t BETWEEN l.t - 2 AND l.t + 3 AND l.v > 0", SCHEMA),      # a filter
    ("l.k = r.k AND l.v = r.v AND r.t BETWEEN l.t - 2 AND l.t + 3", SCHEMA),    # two keys
    ("l.k = r.k AND r.t BETWEEN l.t - 2 AND l.t + 3", "id string, t long, k string, v long"),
    ("l.k = r.k AND r.t BETWEEN l.t - 2 AND l.t + 3 AND l.v <= r.v + 1", SCHEMA),  # other columns
    ("l.k = r.k AND r.t BETWEEN l.t - 2 AND l.t + 3 AND l.t * 2 > r.t", SCHEMA),   # not linear
    ("r.t BETWEEN l.t - 2 AND l.t + 3", SCHEMA),                                 # no key
    ("l.k = r.k AND r.t BETWEEN l.t - 2 AND l.t + 3", "id string, t double, k long, v long"),
])
def test_any_other_condition_takes_the_hash_join(spark: Any, condition: str, schema: str) -> None:
    layout = layout_of(spark, condition, schema)
    assert sweep_key(layout, time_window(layout)) is None


def side_rows(prefix: str) -> st.SearchStrategy[list[Row]]:
    """Rows with a null key or time now and then: such a row pairs with nothing."""
    row = st.fixed_dictionaries({"t": st.one_of(st.integers(0, 12), st.none()),
                                 "k": st.one_of(st.sampled_from([1, 2]), st.none()),
                                 "v": st.integers(0, 1)})
    return st.lists(row, max_size=10).map(
        lambda rows: [{"id": f"{prefix}{n}", **r} for n, r in enumerate(rows)])


def joined(spark: Any, join: str, condition: str, lefts: list[Row], rights: list[Row],
           **kwargs: Any) -> Counter[str]:
    def frame(rows: list[Row]) -> Any:
        return spark.createDataFrame([(r["id"], r["t"], r["k"], r["v"]) for r in rows], SCHEMA)

    the_spec = spec(condition, join=join, left=COLUMNS, right=COLUMNS)
    result = interval_join(frame(lefts), frame(rights), the_spec, **kwargs)
    names = {"l": ("l_id", "l_t", "l_k", "l_v"), "r": ("r_id", "r_t", "r_k", "r_v")}

    def side(row: Any, key: str) -> Row | None:
        if row["_kind"] == ("right" if key == "l" else "left"):
            return None
        return dict(zip(COLUMNS, (row[n] for n in names[key]), strict=True))
    return Counter(json.dumps({"l": side(r, "l"), "r": side(r, "r")}, sort_keys=True)
                   for r in result.rows.collect())


@settings(max_examples=examples(25))
@given(join=st.sampled_from(["inner", "left", "right"]), lo=st.integers(-3, 2),
       width=st.integers(0, 4), lefts=side_rows("a"), rights=side_rows("b"),
       bin_ms=st.sampled_from([None, 1, 3]), replicate=st.sampled_from(["left", "right"]))
def test_the_sweep_gives_the_nested_loops_rows(spark: Any, join: str, lo: int, width: int,
                                               lefts: list[Row], rights: list[Row],
                                               bin_ms: int | None, replicate: str) -> None:
    hi = lo + width
    condition = f"l.k = r.k AND l.t BETWEEN r.t + ({lo}) AND r.t + ({hi})"

    def holds(a: Row, b: Row) -> bool:
        return (None not in (a["k"], b["k"], a["t"], b["t"]) and a["k"] == b["k"]
                and lo <= a["t"] - b["t"] <= hi)
    assert joined(spark, join, condition, lefts, rights, bin_ms=bin_ms, replicate=replicate) == \
        nested_loop(join, lefts, rights, holds)


def test_a_hot_key_across_many_bins_and_partitions(spark: Any) -> None:
    """Many rows of one key over many bins, each left row's pairs found in its bin's run."""
    lefts = [{"id": f"a{n}", "t": n, "k": 7, "v": 0} for n in range(0, 200, 3)]
    # In no order of time: each (key, bin) group is sorted in its task.
    rights = [{"id": f"b{n}", "t": n, "k": 7 if n % 5 else 8, "v": 0}
              for n in [*range(199, -1, -2), *range(0, 200, 2)]]
    condition = "l.k = r.k AND r.t BETWEEN l.t - 4 AND l.t + 2"

    def holds(a: Row, b: Row) -> bool:
        return a["k"] == b["k"] and -4 <= b["t"] - a["t"] <= 2
    for join in ("inner", "left", "right"):
        assert joined(spark, join, condition, lefts, rights) == nested_loop(join, lefts, rights, holds)
