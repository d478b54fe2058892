"""The reference table filter: seed 002's rules, the predicate, bad input, properties."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.cli import EXIT_INVALID, main
from joins.core.fields import json_equal, read_path
from joins.errors import ConfigError, InputRecordError
from joins.microbatch import run_reference
from joins.operators.registry import get_operator
from joins.operators.table_filter import DEFINITION
from joins.operators.table_filter.reference import TableFilterProcessor, evaluate
from joins.operators.table_filter.spec import (
    PredicateSpec,
    TableFilterSpec,
    TableRecord,
    parse_table_filter_record,
)
from joins.scenario import load_scenario
from joins.scenario.runner import prepare
from joins.spec import parse_spec

SCENARIO_DIR = Path(__file__).parent.parent / "scenarios"
GE10 = {"field": "n", "op": "ge", "value": 10}


def make_spec(predicate: dict[str, Any] | None = None, versioned: bool = False,
              retention: int = 1000) -> TableFilterSpec:
    config: dict[str, Any] = {"predicate": predicate or GE10, "versioned": versioned}
    if versioned:
        config["history_retention_ms"] = retention
    return parse_spec(TableFilterSpec, config, operator="table_filter")


def records(rows: list[tuple[Any, Any, int]]) -> list[TableRecord]:
    return [parse_table_filter_record({"i": i, "key": k, "value": v, "ts": t}, i)
            for i, (k, v, t) in enumerate(rows)]


def run(spec: TableFilterSpec, rows: list[tuple[Any, Any, int]],
        processor: TableFilterProcessor | None = None) -> list[list[dict[str, Any]]]:
    processor = processor or TableFilterProcessor(spec)
    return [processor.process(r) for r in records(rows)]


def predicate(op: str, value: Any, field: str | None = "n") -> PredicateSpec:
    raw: dict[str, Any] = {"op": op, "value": value}
    if field is not None:
        raw["field"] = field
    return PredicateSpec.model_validate(raw)


# ---- the predicate ----------------------------------------------------------------------------

@pytest.mark.parametrize(("op", "operand", "subject", "verdict"), [
    ("eq", 1, 1.0, "pass"), ("eq", 1, True, "fail"), ("eq", True, True, "pass"),
    ("eq", "1", 1, "fail"), ("eq", None, None, "pass"), ("eq", {"a": [1]}, {"a": [1.0]}, "pass"),
    ("ne", 1, True, "pass"), ("ne", "x", "x", "fail"),
    ("lt", 10, 9.5, "pass"), ("lt", 10, 10, "fail"), ("le", 10, 10, "pass"),
    ("gt", "b", "c", "pass"), ("ge", "b", "a", "fail"),
    ("lt", 10, "5", "incomparable"), ("gt", 0, True, "incomparable"),
    ("lt", "a", None, "incomparable"), ("ge", 1, {"n": 1}, "incomparable"),
    ("in", [1, "x"], "x", "pass"), ("in", [1, "x"], True, "fail"), ("in", [], 1, "fail"),
    ("not_in", ["deleted"], "active", "pass"), ("not_in", ["deleted"], "deleted", "fail"),
    ("not_in", [1], None, "pass"),
])
def test_predicate_ops(op: str, operand: Any, subject: Any, verdict: str) -> None:
    assert evaluate(predicate(op, operand), {"n": subject}) == verdict


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in"])
def test_a_missing_field_fails_every_op(op: str) -> None:
    operand = [1] if op in ("in", "not_in") else 1
    assert evaluate(predicate(op, operand), {"m": 1}) == "missing_field"
    assert evaluate(predicate(op, operand, "n.x"), {"n": 1}) == "missing_field"
    assert evaluate(predicate(op, operand), "not an object") == "missing_field"


def test_paths_and_the_whole_value() -> None:
    assert read_path({"a": {"b": {"c": 0}}}, "a.b.c") == 0
    assert read_path({"a": None}, "a") is None
    assert evaluate(predicate("eq", "", None), "") == "pass"
    assert evaluate(predicate("eq", {"x": 1}, None), {"x": 1}) == "pass"
    assert not json_equal([1, 2], [1, 2, 3])
    assert not json_equal({"a": 1}, {"b": 1})


# ---- seed 002 ----------------------------------------------------------------------------------

def test_unversioned_drops_null_to_null() -> None:
    processor = TableFilterProcessor(make_spec())
    out = run(processor.spec, [("k", {"n": 5}, 1), ("k", {"n": 12}, 2), ("k", {"n": 3}, 3),
                               ("k", {"n": 4}, 4), ("k", None, 5)], processor)
    assert out == [[], [{"key": "k", "value": {"n": 12}, "old_value": None, "ts": 2,
                         "is_latest": True}],
                   [{"key": "k", "value": None, "old_value": {"n": 12}, "ts": 3,
                     "is_latest": True}], [], []]
    assert processor.metrics["null_to_null_dropped"] == 3


def test_versioned_forwards_every_rejected_record_as_a_tombstone() -> None:
    processor = TableFilterProcessor(make_spec(versioned=True))
    out = run(processor.spec, [("k", {"n": 5}, 1), ("k", {"n": 4}, 2), ("k", None, 3)], processor)
    assert [items[0]["value"] for items in out] == [None, None, None]
    assert [items[0]["old_value"] for items in out] == [None, None, None]
    assert processor.metrics["null_to_null_dropped"] == 0


def test_versioned_out_of_order_old_value_is_the_filtered_latest() -> None:
    processor = TableFilterProcessor(make_spec(versioned=True))
    out = run(processor.spec, [("k", {"n": 12}, 10), ("k", {"n": 3}, 5), ("k", {"n": 15}, 7),
                               ("k", {"n": 1}, 11)], processor)
    assert out[1] == [{"key": "k", "value": None, "old_value": {"n": 12}, "ts": 5,
                       "is_latest": False}]
    assert out[2] == [{"key": "k", "value": {"n": 15}, "old_value": {"n": 12}, "ts": 7,
                       "is_latest": False}]
    # The out-of-order updates did not replace the latest value.
    assert out[3] == [{"key": "k", "value": None, "old_value": {"n": 12}, "ts": 11,
                       "is_latest": True}]
    assert processor.metrics["out_of_order_forwarded"] == 2


def test_unversioned_follows_arrival_whatever_the_ts() -> None:
    out = run(make_spec(), [("k", {"n": 12}, 10), ("k", {"n": 13}, 5)])
    assert out[1] == [{"key": "k", "value": {"n": 13}, "old_value": {"n": 12}, "ts": 5,
                       "is_latest": True}]


def test_versioned_expired_is_not_forwarded() -> None:
    processor = TableFilterProcessor(make_spec(versioned=True, retention=5))
    out = run(processor.spec, [("a", {"n": 12}, 10), ("b", {"n": 12}, 4), ("b", {"n": 12}, 5)],
              processor)
    assert out[1] == []
    assert out[2] == [{"key": "b", "value": {"n": 12}, "old_value": None, "ts": 5,
                       "is_latest": True}]
    assert processor.metrics["expired"] == 1


def test_predicate_failures_are_counted_not_raised() -> None:
    processor = TableFilterProcessor(make_spec())
    run(processor.spec, [("k", {"m": 1}, 1), ("k", {"n": "x"}, 2), ("k", "scalar", 3)], processor)
    assert processor.metrics["missing_field"] == 2
    assert processor.metrics["incomparable"] == 1


# ---- bad input and bad config ------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "field"), [
    ({"i": 0, "key": "k", "value": 1}, "ts"),
    ({"i": 0, "key": "k", "value": 1, "ts": "1"}, "ts"),
    ({"i": 0, "key": "k", "value": 1, "ts": 1.5}, "ts"),
    ({"i": 0, "value": 1, "ts": 1}, "key"),
    ({"i": 0, "key": None, "value": 1, "ts": 1}, "key"),
    ({"i": 0, "key": "k", "ts": 1}, "value"),
    ({"i": 0, "key": "k", "value": 1, "ts": 1, "side": "left"}, "side"),
    ({"key": "k", "value": 1, "ts": 1}, "i"),
])
def test_bad_record_names_index_and_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputRecordError) as err:
        parse_table_filter_record(raw, 4)
    assert (err.value.index, err.value.field) == (4, field)
    assert f"record 4, field '{field}'" in str(err.value)


@pytest.mark.parametrize(("config", "fragment"), [
    ({"predicate": {"op": "contains", "value": 1}, "versioned": False}, "config.predicate.op"),
    ({"predicate": {"op": "eq"}, "versioned": False},
     "config.predicate.value: required setting is missing"),
    ({"predicate": {"op": "in", "value": "x"}, "versioned": False},
     "config.predicate.value: op 'in' needs a list"),
    ({"predicate": {"op": "not_in", "value": {"a": 1}}, "versioned": False},
     "config.predicate.value: op 'not_in' needs a list"),
    ({"predicate": {"op": "lt", "value": None}, "versioned": False},
     "config.predicate.value: op 'lt' compares numbers or strings"),
    ({"predicate": {"op": "ge", "value": True}, "versioned": False},
     "config.predicate.value: op 'ge' compares numbers or strings"),
    ({"predicate": {"field": "", "op": "eq", "value": 1}, "versioned": False},
     "config.predicate.field"),
    ({"predicate": {"field": "a.", "op": "eq", "value": 1}, "versioned": False},
     "config.predicate.field"),
    ({"predicate": {"field": 3, "op": "eq", "value": 1}, "versioned": False},
     "config.predicate.field"),
    ({"predicate": {"op": "eq", "value": 1, "not": True}, "versioned": False},
     "config.predicate.not: unknown key"),
    ({"predicate": {"op": "eq", "value": 1}, "versioned": False, "grace_ms": 1},
     "config.grace_ms: unknown key"),
    ({"predicate": {"op": "eq", "value": 1}}, "config.versioned: required setting is missing"),
    ({"versioned": False}, "config.predicate: required setting is missing"),
    ({"predicate": {"op": "eq", "value": 1}, "versioned": True},
     "config.history_retention_ms: required when versioned is true"),
    ({"predicate": {"op": "eq", "value": 1}, "versioned": False, "history_retention_ms": 3},
     "config.history_retention_ms: only meaningful"),
])
def test_bad_config_names_the_key(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_spec(TableFilterSpec, config, operator="table_filter")
    assert fragment in str(err.value)
    assert str(err.value).startswith("table_filter: invalid config")


@pytest.mark.parametrize(("config", "rows", "fragment"), [
    ({"predicate": GE10, "versioned": False}, [{"i": 0, "key": "k", "value": 1}],
     "record 0, field 'ts'"),
    ({"predicate": {"op": "between", "value": 1}, "versioned": False}, [], "config.predicate.op"),
])
def test_replay_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       config: dict[str, Any], rows: list[Any],
                                       fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "operator": "table_filter", "config": config,
                                "input": rows, "expected": [], "notes": "bad"}))
    assert main(["replay", str(path)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert fragment in err
    assert "Traceback" not in err


# ---- properties --------------------------------------------------------------------------------

KEYS = ("k1", "k2", "k3")
VALUES = ({"n": 5}, {"n": 10}, {"n": 20}, {"n": "x"}, {"m": 1}, None)
rows_strategy = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES), st.integers(0, 12)), max_size=25)


def passes(value: Any) -> bool:
    """The GE10 predicate, written independently of the processor."""
    n = value.get("n") if isinstance(value, dict) else None
    return isinstance(n, int) and n >= 10


def final_by_arrival(items: list[dict[str, Any]]) -> dict[Any, Any]:
    last = {json.dumps(item["key"]): item["value"] for item in items}
    return {k: v for k, v in last.items() if v is not None}


def final_by_ts(items: list[dict[str, Any]]) -> dict[Any, Any]:
    """A versioned result read as a table: per key, the item of the largest ts (ties: later)."""
    best: dict[str, dict[str, Any]] = {}
    for item in items:
        key = json.dumps(item["key"])
        if key not in best or item["ts"] >= best[key]["ts"]:
            best[key] = item
    return {k: item["value"] for k, item in best.items() if item["value"] is not None}


@given(rows=rows_strategy)
def test_unversioned_output_is_the_filter_of_the_final_input(
        rows: list[tuple[Any, Any, int]]) -> None:
    items = [item for out in run(make_spec(), rows) for item in out]
    final_input: dict[str, Any] = {}
    for k, v, _ in rows:
        final_input[json.dumps(k)] = v
    assert final_by_arrival(items) == {k: v for k, v in final_input.items() if passes(v)}
    # The output is a consistent changelog: each old_value is the key's previous output value.
    previous: dict[str, Any] = {}
    for item in items:
        key = json.dumps(item["key"])
        assert item["old_value"] == previous.get(key)
        previous[key] = item["value"]


@given(rows=rows_strategy)
def test_versioned_output_read_by_ts_is_the_filter_of_the_latest_input(
        rows: list[tuple[Any, Any, int]]) -> None:
    items = [item for out in run(make_spec(versioned=True), rows) for item in out]
    latest: dict[str, tuple[Any, int]] = {}
    for k, v, t in rows:
        key = json.dumps(k)
        if key not in latest or t >= latest[key][1]:
            latest[key] = (v, t)
    assert final_by_ts(items) == {k: v for k, (v, _) in latest.items() if passes(v)}
    # Nothing expires here, and nothing is dropped: one output per input (seed 002).
    assert len(items) == len(rows)


# ---- micro-batches -----------------------------------------------------------------------------

SCENARIOS = sorted(SCENARIO_DIR.glob("002_table_filter_*.json"))
# This scenario has a batch whose last item for a key is out of order (is_latest false): the
# compaction must keep the batch's latest value instead (joins.microbatch.compact_table_items).
COMPACTION_LOSES_LATEST = {"002_table_filter_versioned_expired"}


def _batch_param(path: Path) -> Any:
    return pytest.param(path, id=path.stem)


def test_definition_is_registered() -> None:
    assert get_operator("table_filter") is DEFINITION
    assert DEFINITION.compacts_output


@pytest.mark.parametrize("path", [_batch_param(p) for p in SCENARIOS])
def test_final_table_is_the_same_at_every_batch_size(path: Path) -> None:
    definition, spec, recs = prepare(load_scenario(path))
    final = final_by_ts if spec.versioned else final_by_arrival
    finals = [final(run_reference(definition, spec, recs, size)) for size in (1, 2, 3, None)]
    assert all(f == finals[0] for f in finals), finals
