"""The Spark table filter, map and aggregate against the reference engine: every shipped
scenario at batch sizes 1, 2 and the whole input, random tables cut into random micro-batches,
a value the aggregate cannot use failing with the reference's message, and the fold with
Spark's generated code on (the suite's session runs without it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.core.operator import OperatorDefinition
from joins.errors import InputRecordError
from joins.microbatch import run_reference
from joins.operators import table_aggregate, table_filter, table_map
from joins.operators.table_aggregate.spark_replay import AggregateReplay
from joins.operators.table_filter.spark_replay import FilterReplay
from joins.operators.table_map.spark_replay import MapReplay
from joins.scenario import load_scenario
from joins.scenario.runner import prepare
from tests.budget import spark_examples
from tests.spark.codegen import generated_code
from tests.spark.operator_helpers import cut, nonzero, records_of, reference_items, scenarios_of

pytestmark = pytest.mark.spark

FILTER, AGGREGATE, MAP = table_filter.DEFINITION, table_aggregate.DEFINITION, table_map.DEFINITION
REPLAYS: dict[str, Any] = {"table_filter": FilterReplay, "table_aggregate": AggregateReplay,
                           "table_map": MapReplay}


def replay_items(definition: OperatorDefinition, spark: Any, tmp_path: Path, config: dict[str, Any],
                 raw: list[dict[str, Any]], cuts: list[int]) -> tuple[list[Any], list[Any]]:
    """(Spark items, reference items) of `raw` cut into batches; counters must agree too."""
    spec = definition.spec_type.model_validate(config)
    batches = cut(records_of(definition, raw), cuts)
    want_metrics: dict[str, int] = {}
    want = reference_items(definition, spec, batches, want_metrics)
    replay = REPLAYS[definition.name](spark, spec, str(tmp_path))
    counters: dict[str, int] = {}
    last: dict[int, int] = {}
    for batch in batches:
        replay.land(batch)
        result = replay.run()
        last[result.batch_id] = batch[-1].i
        for name in want_metrics:
            counters[name] = counters.get(name, 0) + int(result.done.report.get(name, 0))
    got = [{**row[-1], "after_input": last[row[0]]} for row in replay.ordered_rows()]
    assert nonzero(counters) == nonzero(want_metrics)
    return got, want


@pytest.mark.slow
@pytest.mark.parametrize("path", [*scenarios_of("table_filter"), *scenarios_of("table_map"),
                                  *scenarios_of("table_aggregate")], ids=lambda p: p.stem)
def test_every_filter_map_and_aggregate_scenario_on_spark(spark: Any, path: Path) -> None:
    definition, spec, records = prepare(load_scenario(path))
    module, name = definition.spark_replay.split(":")
    replay = getattr(__import__(module, fromlist=[name]), name)
    for batch_size in (1, 2, None):
        want_metrics: dict[str, int] = {}
        want = run_reference(definition, spec, records, batch_size or len(records), want_metrics)
        got_metrics: dict[str, int] = {}
        assert replay(spec, records, batch_size, got_metrics) == want, f"batch {batch_size}"
        assert nonzero(got_metrics) == nonzero(want_metrics)


# ---- targeted ----------------------------------------------------------------------------------


def test_versioned_filter_forwards_rejections_and_out_of_order(spark: Any, tmp_path: Path) -> None:
    config = {"predicate": {"field": "n", "op": "ge", "value": 2}, "versioned": True,
              "history_retention_ms": 5}
    raw = [{"key": "a", "value": {"n": 3}, "ts": 10},
           {"key": "a", "value": {"n": 1}, "ts": 11},      # rejected: a tombstone is forwarded
           {"key": "a", "value": {"n": 9}, "ts": 7},       # out of order: is_latest false
           {"key": "b", "value": {"m": 1}, "ts": 12},      # missing field
           {"key": "c", "value": {"n": 5}, "ts": 2}]       # expired (2 < 12 - 5)
    got, want = replay_items(FILTER, spark, tmp_path, config, raw, [2, 3])
    assert got == want
    assert [(i["key"], i["value"], i["is_latest"]) for i in got] == \
        [("a", None, True), ("a", {"n": 9}, False), ("b", None, True)]


@pytest.mark.parametrize("limit", [0, 10**6], ids=["cached", "checkpointed"])
@pytest.mark.parametrize("function", ["count", "concat"])
def test_an_aggregate_batch_is_the_same_whether_its_frames_are_cached_or_checkpointed(
        spark: Any, tmp_path: Path, limit: int, function: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every other test's batches are small, so their shared frames (the folded updates, the
    # groups' results) are checkpointed; a batch above the limit caches them instead. Keys move
    # between groups, one is deleted and one group empties, so every frame and write reads them.
    from joins.spark import frames

    monkeypatch.setattr(frames, "CHECKPOINT_MAX_ROWS", limit)
    aggregate = {"function": "count"} if function == "count" else {"function": "concat", "field": "s"}
    config = {"group_by": "g", "aggregate": aggregate, "versioned": False}
    raw = [{"key": "a", "value": {"g": "x", "s": "1"}, "ts": 1},
           {"key": "b", "value": {"g": "x", "s": "2"}, "ts": 2},
           {"key": "c", "value": {"g": "y", "s": "3"}, "ts": 3},
           {"key": "a", "value": {"g": "y", "s": "4"}, "ts": 4},     # moves from x to y
           {"key": "b", "value": None, "ts": 5},                     # deleted: x empties
           {"key": "c", "value": {"g": "y", "s": "5"}, "ts": 6}]
    got, want = replay_items(AGGREGATE, spark, tmp_path, config, raw, [3, 3])
    assert got == want
    assert {i["key"] for i in got} == {"x", "y"}


def test_aggregate_bad_value_fails_with_the_reference_message(spark: Any, tmp_path: Path) -> None:
    spec = AGGREGATE.spec_type.model_validate(
        {"group_by": "g", "aggregate": {"function": "sum", "field": "n"}, "versioned": False})
    records = records_of(AGGREGATE, [{"key": "a", "value": {"g": "x", "n": 1}, "ts": 1},
                                     {"key": "b", "value": {"g": "x", "n": "2"}, "ts": 2}])
    with pytest.raises(InputRecordError) as want:
        run_reference(AGGREGATE, spec, records, 2)
    replay = AggregateReplay(spark, spec, str(tmp_path))
    replay.land(records)
    with pytest.raises(InputRecordError) as got:
        replay.run()
    assert str(got.value) == str(want.value)
    assert (got.value.index, got.value.field) == (1, "value.n")


# ---- properties: random tables, random batch splits --------------------------------------------

VALUES = [{"g": "x", "n": 1, "s": "p"}, {"g": "x", "n": 2.5, "s": "q"}, {"g": 1, "n": -3, "s": ""},
          {"g": 1.0, "n": 4, "s": "r"}, {"g": None, "n": 1}, {"n": 7, "s": "t"},
          {"g": {"o": 1}, "n": 1.0, "s": 5}, None]


@st.composite
def tables(draw: st.DrawFn) -> dict[str, Any]:
    versioned = draw(st.booleans())
    config: dict[str, Any] = {"versioned": versioned}
    if versioned:
        config["history_retention_ms"] = draw(st.sampled_from([3, 100]))
    n = draw(st.integers(1, 10))
    raw = [{"key": draw(st.sampled_from(["a", "b", "u10", 1, 1.0, 2])),
            "value": draw(st.sampled_from(VALUES)), "ts": draw(st.integers(0, 10))} for _ in range(n)]
    return {"config": config, "raw": raw, "cuts": draw(st.lists(st.integers(1, n), min_size=1, max_size=3))}


PREDICATES = [{"field": "n", "op": "gt", "value": 1}, {"field": "g", "op": "eq", "value": 1},
              {"field": "g", "op": "in", "value": ["x", {"o": 1.0}]},
              {"field": "s", "op": "lt", "value": "q"}, {"field": "g", "op": "ne", "value": None}]
AGGREGATES = [{"function": "count"}, {"function": "sum", "field": "n"},
              {"function": "concat", "field": "s"}, {"function": "concat"}]


@pytest.mark.slow
@spark_examples(10)
@given(case=tables(), predicate=st.sampled_from(PREDICATES))
def test_filter_equals_reference_for_random_tables(spark: Any, tmp_path_factory: Any,
                                                   case: dict[str, Any],
                                                   predicate: dict[str, Any]) -> None:
    got, want = replay_items(FILTER, spark, tmp_path_factory.mktemp("filter"),
                             {**case["config"], "predicate": predicate}, case["raw"], case["cuts"])
    assert got == want


@pytest.mark.slow
@spark_examples(10)
@given(case=tables(), aggregate=st.sampled_from(AGGREGATES))
def test_aggregate_equals_reference_for_random_tables(spark: Any, tmp_path_factory: Any,
                                                      case: dict[str, Any],
                                                      aggregate: dict[str, Any]) -> None:
    # sum over "n" of values that all hold a number; concat of "s" where present.
    raw = [r for r in case["raw"] if aggregate["function"] != "concat" or "field" not in aggregate
           or r["value"] is None or "s" in r["value"] or r["value"].get("g") is None]
    if not raw:
        return
    got, want = replay_items(AGGREGATE, spark, tmp_path_factory.mktemp("aggregate"),
                             {**case["config"], "group_by": "g", "aggregate": aggregate}, raw,
                             case["cuts"])
    assert got == want


MAPS = [[{"field": "n", "as": "x"}], ["g", "s"], [{"field": "g", "as": "a"}, {"field": "g", "as": "b"}, "n"]]


@pytest.mark.slow
@spark_examples(10)
@given(case=tables(), columns=st.sampled_from(MAPS))
def test_map_equals_reference_for_random_tables(spark: Any, tmp_path_factory: Any,
                                                case: dict[str, Any], columns: list[Any]) -> None:
    got, want = replay_items(MAP, spark, tmp_path_factory.mktemp("map"),
                             {**case["config"], "columns": columns}, case["raw"], case["cuts"])
    assert got == want


# ---- with generated code -----------------------------------------------------------------------


@pytest.mark.parametrize("definition", [FILTER, MAP], ids=lambda d: d.name)
def test_a_tombstone_over_held_state_with_generated_code(spark: Any, tmp_path: Path,
                                                         definition: OperatorDefinition) -> None:
    # The second batch deletes a key the first one stored: the fold's current value turns null.
    config: dict[str, Any] = {"versioned": True, "history_retention_ms": 100}
    config |= ({"predicate": {"field": "n", "op": "ge", "value": 0}} if definition is FILTER
               else {"columns": [{"field": "n", "as": "m"}]})
    raw = [{"key": "a", "value": {"n": 1}, "ts": 1}, {"key": "a", "value": None, "ts": 2}]
    with generated_code(spark):   # a fold claiming a field is never null fails only compiled
        got, want = replay_items(definition, spark, tmp_path, config, raw, [1])
    assert got == want
    assert [(i["value"], i["old_value"]) for i in got][-1] == (None, {"n" if definition is FILTER
                                                                      else "m": 1})
