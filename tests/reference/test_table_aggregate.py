"""The reference table aggregate: seed 002's rules, count/sum/concat, bad input, properties."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.cli import EXIT_INVALID, main
from joins.core.versioned import TableRecord
from joins.errors import ConfigError, InputRecordError
from joins.microbatch import run_reference
from joins.operators.registry import get_operator
from joins.operators.table_aggregate import DEFINITION
from joins.operators.table_aggregate.reference import TableAggregateProcessor, key_order
from joins.operators.table_aggregate.spec import TableAggregateSpec, parse_table_aggregate_record
from joins.scenario import load_scenario
from joins.scenario.runner import prepare
from joins.spec import parse_spec

SCENARIO_DIR = Path(__file__).parent.parent / "scenarios"
SUM = {"function": "sum", "field": "amount"}


def make_spec(aggregate: Any = "count", group_by: str = "value", versioned: bool = False,
              retention: int = 1000) -> TableAggregateSpec:
    config: dict[str, Any] = {"group_by": group_by, "aggregate": aggregate, "versioned": versioned}
    if versioned:
        config["history_retention_ms"] = retention
    return parse_spec(TableAggregateSpec, config, operator="table_aggregate")


def records(rows: list[tuple[Any, Any, int]]) -> list[TableRecord]:
    return [parse_table_aggregate_record({"i": i, "key": k, "value": v, "ts": t}, i)
            for i, (k, v, t) in enumerate(rows)]


def run(spec: TableAggregateSpec, rows: list[tuple[Any, Any, int]],
        processor: TableAggregateProcessor | None = None) -> list[list[dict[str, Any]]]:
    processor = processor or TableAggregateProcessor(spec)
    return [processor.process(r) for r in records(rows)]


def item(key: Any, value: Any, ts: int) -> dict[str, Any]:
    return {"key": key, "value": value, "ts": ts}


SEED = [("k", "v1", 1), ("k", "v2", 10), ("k", "v3", 5)]


# ---- seed 002 ----------------------------------------------------------------------------------

def test_seed_example_unversioned() -> None:
    assert run(make_spec(), SEED) == [
        [item("v1", 1, 1)],
        [item("v1", 0, 10), item("v2", 1, 10)],        # remove: v1 ; add: v2
        [item("v2", 0, 10), item("v3", 1, 5)],         # remove: v2 ; add: v3
    ]


def test_seed_example_versioned_ignores_the_older_v3() -> None:
    processor = TableAggregateProcessor(make_spec(versioned=True))
    out = run(processor.spec, SEED, processor)
    assert out == [[item("v1", 1, 1)], [item("v1", 0, 10), item("v2", 1, 10)], []]
    assert processor.metrics == {"out_of_order_ignored": 1, "expired": 0, "null_group_key_skipped": 0}


def test_versioned_latest_tombstone_subtracts_out_of_order_one_does_not() -> None:
    processor = TableAggregateProcessor(make_spec(SUM, "region", versioned=True))
    rows = [("k1", {"region": "eu", "amount": 1}, 1), ("k2", {"region": "eu", "amount": 2}, 5),
            ("k2", None, 3), ("k2", None, 6)]
    out = run(processor.spec, rows, processor)
    assert out[2:] == [[], [item("eu", 1, 6)]]
    assert processor.metrics["out_of_order_ignored"] == 1


def test_versioned_expired_is_ignored() -> None:
    processor = TableAggregateProcessor(make_spec(versioned=True, retention=5))
    out = run(processor.spec, [("a", "x", 10), ("b", "x", 4)], processor)
    assert out[1] == []
    assert processor.metrics["expired"] == 1


def test_same_group_update_emits_once_and_moving_emits_old_group_first() -> None:
    rows = [("k1", {"region": "eu", "amount": 1}, 1), ("k1", {"region": "eu", "amount": 4}, 2),
            ("k1", {"region": "us", "amount": 4}, 3)]
    out = run(make_spec(SUM, "region"), rows)
    assert out == [[item("eu", 1, 1)], [item("eu", 4, 2)],
                   [item("eu", 0, 3), item("us", 4, 3)]]


def test_tombstone_of_an_unknown_key_emits_nothing() -> None:
    assert run(make_spec(), [("k", None, 1)]) == [[]]


def test_group_ts_never_goes_back_even_across_deletion() -> None:
    out = run(make_spec(), [("k", "g", 10), ("k", None, 11), ("k2", "g", 3)])
    assert out == [[item("g", 1, 10)], [item("g", 0, 11)], [item("g", 1, 11)]]


def test_object_groups_and_nested_group_by() -> None:
    rows = [("k1", {"a": {"b": {"x": 1}}}, 1), ("k2", {"a": {"b": {"x": 1}}}, 2)]
    out = run(make_spec("count", "a.b"), rows)
    assert out[1] == [item({"x": 1}, 2, 2)]


# ---- concat ------------------------------------------------------------------------------------

def test_concat_orders_members_by_input_key() -> None:
    rows = [(10, "ten", 1), (2, "two", 2), ("b", "bee", 3), ("a", "ay", 4), ({"id": 1}, "obj", 5)]
    spec = make_spec({"function": "concat", "field": "name"}, "g")
    out = run(spec, [(k, {"g": 1, "name": v}, t) for k, v, t in rows])
    assert [items[0]["value"] for items in out] == [
        "ten", "two,ten", "two,ten,bee", "two,ten,ay,bee", "two,ten,ay,bee,obj"]


def test_concat_survives_subtraction_and_renders_non_strings_as_json() -> None:
    spec = make_spec({"function": "concat", "field": "v"}, "g")
    out = run(spec, [("a", {"g": 1, "v": "x"}, 1), ("b", {"g": 1, "v": {"n": [1, None]}}, 2),
                     ("c", {"g": 1, "v": 3}, 3), ("b", None, 4), ("a", {"g": 1, "v": ""}, 5)])
    assert [items[0]["value"] for items in out] == [
        "x", 'x,{"n":[1,null]}', 'x,{"n":[1,null]},3', "x,3", ",3"]


def test_concat_without_field_uses_the_whole_value() -> None:
    out = run(make_spec("concat", "value"), [("a", "x", 1)])
    assert out == [[item("x", "x", 1)]]


def test_key_order_keeps_numbers_strings_and_others_apart() -> None:
    keys = [{"a": 1}, "10", 10, "9", 9.5, True]
    assert sorted(keys, key=key_order) == [9.5, 10, "10", "9", True, {"a": 1}]


# ---- bad input and bad config ------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "value", "field"), [
    (make_spec("count", "region"), {"region": [1]}, "value.region"),
    (make_spec("count", "value"), [1, 2], "value"),
    (make_spec(SUM, "region"), {"region": "eu"}, "value.amount"),
    (make_spec(SUM, "region"), {"region": "eu", "amount": "3"}, "value.amount"),
    (make_spec(SUM, "region"), {"region": "eu", "amount": True}, "value.amount"),
    (make_spec({"function": "concat", "field": "name"}, "region"), {"region": "eu"}, "value.name"),
])
def test_a_value_the_aggregate_cannot_use_raises_and_changes_nothing(
        spec: TableAggregateSpec, value: Any, field: str) -> None:
    processor = TableAggregateProcessor(spec)
    good = {"region": "eu", "amount": 1, "name": "n"}
    first, bad, after = records([("k", good, 1), ("k", value, 2), ("k", None, 3)])
    assert processor.process(first)
    with pytest.raises(InputRecordError) as err:
        processor.process(bad)
    assert (err.value.index, err.value.field) == (1, field)
    assert f"record 1, field '{field}'" in str(err.value)
    # The bad record changed no state: the tombstone still removes the first value, and the
    # emptied group holds the aggregate after the subtraction (Kafka's), not a tombstone.
    group = "eu" if spec.group_path else good
    empty = "" if spec.aggregate.function == "concat" else 0
    assert processor.process(after) == [item(group, empty, 3)]


@pytest.mark.parametrize("value", [{"region": None}, {"amount": 1}, "scalar"],
                         ids=["null", "absent", "not an object"])
def test_a_null_group_key_is_skipped_and_counted(value: Any) -> None:
    """The key leaves its old group (as on a tombstone), joins none, and is counted; it
    never raises (Kafka's KTableRepartitionMap skips a null selected key)."""
    processor = TableAggregateProcessor(make_spec(SUM, "region"))
    out = run(make_spec(SUM, "region"), [("k", {"region": "eu", "amount": 2}, 1), ("k", value, 2),
                                         ("j", value, 3), ("k", {"region": "eu", "amount": 5}, 4)],
              processor)
    assert out == [[item("eu", 2, 1)], [item("eu", 0, 2)], [], [item("eu", 5, 4)]]
    assert processor.metrics["null_group_key_skipped"] == 2


@pytest.mark.parametrize(("raw", "field"), [
    ({"i": 0, "key": "k", "value": 1}, "ts"),
    ({"i": 0, "key": "k", "value": 1, "ts": "2"}, "ts"),
    ({"i": 0, "key": None, "value": 1, "ts": 2}, "key"),
    ({"i": 0, "key": "k", "ts": 2}, "value"),
])
def test_bad_record_names_index_and_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputRecordError) as err:
        parse_table_aggregate_record(raw, 2)
    assert (err.value.index, err.value.field) == (2, field)
    assert "table_aggregate input" in str(err.value)


@pytest.mark.parametrize(("config", "fragment"), [
    ({"group_by": "g", "aggregate": {"function": "sum"}, "versioned": False},
     "config.aggregate.field: required for sum"),
    ({"group_by": "g", "aggregate": "sum", "versioned": False},
     "config.aggregate.field: required for sum"),
    ({"group_by": "g", "aggregate": {"function": "avg"}, "versioned": False},
     "config.aggregate.function"),
    ({"group_by": "g", "aggregate": "median", "versioned": False}, "config.aggregate.function"),
    ({"group_by": "g", "aggregate": {"function": "count", "field": "x"}, "versioned": False},
     "config.aggregate.field: count counts"),
    ({"group_by": "g", "aggregate": {"function": "sum", "field": "x", "as": "y"},
      "versioned": False}, "config.aggregate.as: unknown key"),
    ({"group_by": "", "aggregate": "count", "versioned": False}, "config.group_by"),
    ({"group_by": "a..b", "aggregate": "count", "versioned": False}, "config.group_by"),
    ({"aggregate": "count", "versioned": False}, "config.group_by: required setting is missing"),
    ({"group_by": "g", "versioned": False}, "config.aggregate: required setting is missing"),
    ({"group_by": "g", "aggregate": "count"}, "config.versioned: required setting is missing"),
    ({"group_by": "g", "aggregate": "count", "versioned": True},
     "table_aggregate: invalid config: config.history_retention_ms: required"),
    ({"group_by": "g", "aggregate": "count", "versioned": False, "having": 1},
     "config.having: unknown key"),
])
def test_bad_config_names_the_key(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_spec(TableAggregateSpec, config, operator="table_aggregate")
    assert fragment in str(err.value)


@pytest.mark.parametrize(("config", "rows", "fragment"), [
    ({"group_by": "g", "aggregate": SUM, "versioned": False},
     [{"i": 0, "key": "k", "value": {"g": 1, "amount": "x"}, "ts": 1}],
     "record 0, field 'value.amount'"),
    ({"group_by": "g", "aggregate": "count", "versioned": False},
     [{"i": 0, "key": "k", "value": {"g": 1}}], "record 0, field 'ts'"),
    ({"group_by": "g", "aggregate": "sum", "versioned": False}, [], "config.aggregate.field"),
])
def test_replay_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       config: dict[str, Any], rows: list[Any],
                                       fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "operator": "table_aggregate", "config": config,
                                "input": rows, "expected": [], "notes": "bad"}))
    assert main(["replay", str(path)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert fragment in err
    assert "Traceback" not in err


# ---- properties --------------------------------------------------------------------------------

KEYS = (1, 2, 10, "a", "b")
VALUES = ({"g": "x", "n": 1, "s": "p"}, {"g": "x", "n": 5, "s": "q"}, {"g": "y", "n": 2, "s": ""},
          {"g": "y", "n": -3, "s": "r"}, {"g": "z", "n": 7, "s": "t"}, None)
AGGREGATES = ({"function": "count"}, {"function": "sum", "field": "n"},
              {"function": "concat", "field": "s"})
rows_strategy = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES), st.integers(0, 12)), max_size=25)


def from_scratch(table: dict[Any, Any], function: str) -> dict[str, Any]:
    """GROUP BY g over the current input table, written independently of the processor:
    concat orders members numbers first (numerically), then strings."""
    groups: dict[str, list[tuple[Any, Any]]] = {}
    for key, value in table.items():
        if value is not None:
            groups.setdefault(json.dumps(value["g"]), []).append((key, value))
    result: dict[str, Any] = {}
    for group, members in groups.items():
        members.sort(key=lambda m: (isinstance(m[0], str), m[0]))
        if function == "count":
            result[group] = len(members)
        elif function == "sum":
            result[group] = sum(v["n"] for _, v in members)
        else:
            result[group] = ",".join(v["s"] for _, v in members)
    return result


def final_output(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {json.dumps(i["key"]): i["value"] for i in items}


def emptied(items: list[dict[str, Any]], function: str) -> dict[str, Any]:
    """Every group the output ever named, at the aggregate of no members: Kafka keeps a group
    whose last member left, at what the subtractor left (0, or "" for concat)."""
    return {json.dumps(i["key"]): "" if function == "concat" else 0 for i in items}


@pytest.mark.parametrize("versioned", [False, True])
@pytest.mark.parametrize("aggregate", AGGREGATES, ids=[a["function"] for a in AGGREGATES])
@given(rows=rows_strategy)
def test_final_aggregates_equal_a_from_scratch_aggregation(
        rows: list[tuple[Any, Any, int]], aggregate: dict[str, str], versioned: bool) -> None:
    """Unversioned: of the final input table by arrival; versioned: of the latest-by-ts values
    (history retention exceeds every ts gap, so nothing expires)."""
    items = [i for out in run(make_spec(aggregate, "g", versioned), rows) for i in out]
    table: dict[Any, Any] = {}
    latest_ts: dict[Any, int] = {}
    for key, value, ts in rows:
        if not versioned or key not in latest_ts or ts >= latest_ts[key]:
            table[key], latest_ts[key] = value, ts
    function = aggregate["function"]
    assert final_output(items) == {**emptied(items, function), **from_scratch(table, function)}
    # A group's results never go back in time.
    group_ts: dict[str, int] = {}
    for i in items:
        group = json.dumps(i["key"])
        assert i["ts"] >= group_ts.get(group, i["ts"])
        group_ts[group] = i["ts"]


# ---- micro-batches -----------------------------------------------------------------------------

SCENARIOS = sorted(SCENARIO_DIR.glob("002_table_aggregate_*.json"))


def test_definition_is_registered() -> None:
    assert get_operator("table_aggregate") is DEFINITION
    assert DEFINITION.compacts_output


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_final_table_is_the_same_at_every_batch_size(path: Path) -> None:
    definition, spec, recs = prepare(load_scenario(path))
    finals = [final_output(run_reference(definition, spec, recs, size)) for size in (1, 2, 3, None)]
    assert all(f == finals[0] for f in finals), finals


def test_group_keys_one_and_one_point_zero_are_two_groups() -> None:
    """Group keys follow joins.core.keys: 1, 1.0 and true are three groups."""
    out = run(make_spec(), [("a", 1, 1), ("b", 1.0, 2), ("c", True, 3), ("d", 1, 4)])
    assert out == [[item(1, 1, 1)], [item(1.0, 1, 2)], [item(True, 1, 3)], [item(1, 2, 4)]]
