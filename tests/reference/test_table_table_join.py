"""The reference table-table join: seed 000's rules, bad input, and properties against an oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.cli import EXIT_INVALID, main
from joins.core.keys import key_id
from joins.errors import ConfigError, InputRecordError
from joins.microbatch import run_reference
from joins.operators.registry import get_operator
from joins.operators.table_table_join import DEFINITION
from joins.operators.table_table_join.reference import TableTableJoinProcessor
from joins.operators.table_table_join.spec import (
    TableTableJoinRecord,
    TableTableJoinSpec,
    parse_table_table_join_record,
)
from joins.scenario import load_scenario
from joins.scenario.runner import prepare
from joins.spec import parse_spec

SCENARIO_DIR = Path(__file__).parent.parent / "scenarios"
V = {"versioned": True, "history_retention_ms": 1000}
U = {"versioned": False}


def make_spec(join: str = "inner", left: dict[str, Any] | None = None,
              right: dict[str, Any] | None = None) -> TableTableJoinSpec:
    config = {"join": join, "left": left or U, "right": right or U}
    return parse_spec(TableTableJoinSpec, config, operator="table_table_join")


def records(rows: list[tuple[str, Any, Any, int]]) -> list[TableTableJoinRecord]:
    return [parse_table_table_join_record({"i": i, "side": s, "key": k, "value": v, "ts": t}, i)
            for i, (s, k, v, t) in enumerate(rows)]


def run(spec: TableTableJoinSpec, rows: list[tuple[str, Any, Any, int]],
        processor: TableTableJoinProcessor | None = None) -> list[list[dict[str, Any]]]:
    """Items emitted per input record."""
    processor = processor or TableTableJoinProcessor(spec)
    return [processor.process(r) for r in records(rows)]


PROBLEM = [("left", "k", "a0", 0), ("left", "k", "a4", 4), ("right", "k", "b2", 2),
           ("right", "k", "b1", 1)]


# ---- seed 000 ----------------------------------------------------------------------------------

def test_seed_problem_unversioned_emits_the_out_of_order_join() -> None:
    out = run(make_spec(), PROBLEM)
    assert out == [[], [], [{"key": "k", "value": ["a4", "b2"], "ts": 4}],
                   [{"key": "k", "value": ["a4", "b1"], "ts": 4}]]


def test_seed_problem_versioned_emits_nothing_for_the_out_of_order_record() -> None:
    processor = TableTableJoinProcessor(make_spec(left=V, right=V))
    out = run(processor.spec, PROBLEM, processor)
    assert out[2:] == [[{"key": "k", "value": ["a4", "b2"], "ts": 4}], []]
    assert processor.metrics == {"out_of_order_ignored": 1, "expired": 0}
    # Still put into the right side's versioned store, as history.
    right = processor.store("right")
    assert right.get("k").value == "b2"
    assert right.get("k", as_of=1).value == "b1"


def test_seed_proposal_outcome() -> None:
    rows = [("left", "k", "a0", 0), ("left", "k", "a5", 5), ("right", "k", "b2", 2),
            ("right", "k", "b3", 3), ("right", "k", "b4", 4), ("left", "k", "a1", 1)]
    out = run(make_spec(left=V, right=V), rows)
    assert out == [[], [], [{"key": "k", "value": ["a5", "b2"], "ts": 5}],
                   [{"key": "k", "value": ["a5", "b3"], "ts": 5}],
                   [{"key": "k", "value": ["a5", "b4"], "ts": 5}], []]


def test_seed_proposal_second_example() -> None:
    rows = [("left", "k", "a0", 0), ("right", "k", "b2", 2), ("left", "k", "a5", 5),
            ("left", "k", "a1", 1)]
    out = run(make_spec(left=V, right=V), rows)
    assert out == [[], [{"key": "k", "value": ["a0", "b2"], "ts": 2}],
                   [{"key": "k", "value": ["a5", "b2"], "ts": 5}], []]


@pytest.mark.parametrize(("left", "right", "b1_emits", "a3_emits"), [
    (V, U, True, False),   # out-of-order from the unversioned right side joins, from the left not
    (U, V, False, True),
])
def test_versioning_is_decided_per_side(left: dict[str, Any], right: dict[str, Any],
                                        b1_emits: bool, a3_emits: bool) -> None:
    rows = [("left", "k", "a0", 0), ("left", "k", "a4", 4), ("right", "k", "b2", 2),
            ("right", "k", "b1", 1), ("left", "k", "a3", 3)]
    out = run(make_spec(left=left, right=right), rows)
    assert bool(out[3]) is b1_emits
    assert bool(out[4]) is a3_emits
    if b1_emits:
        assert out[3] == [{"key": "k", "value": ["a4", "b1"], "ts": 4}]
    if a3_emits:
        assert out[4] == [{"key": "k", "value": ["a3", "b2"], "ts": 3}]


def test_equal_ts_on_a_versioned_side_replaces_and_emits() -> None:
    out = run(make_spec(left=V, right=V),
              [("left", "k", "a", 5), ("right", "k", "b", 1), ("left", "k", "a2", 5)])
    assert out[2] == [{"key": "k", "value": ["a2", "b"], "ts": 5}]


def test_expired_put_emits_nothing_and_is_counted() -> None:
    processor = TableTableJoinProcessor(
        make_spec(right={"versioned": True, "history_retention_ms": 2}))
    out = run(processor.spec, [("left", "k", "a1", 1), ("right", "k2", "b10", 10),
                               ("right", "k", "b5", 5), ("right", "k", "b8", 8)], processor)
    assert out == [[], [], [], [{"key": "k", "value": ["a1", "b8"], "ts": 8}]]
    assert processor.metrics == {"out_of_order_ignored": 0, "expired": 1}


# ---- result ts and tombstones ------------------------------------------------------------------

def test_result_ts_is_the_larger_of_both_sides() -> None:
    out = run(make_spec(), [("right", "k", "b", 7), ("left", "k", "a", 3), ("left", "k", "a2", 9)])
    assert [items[0]["ts"] for items in out[1:]] == [7, 9]


def test_inner_tombstone_only_where_a_result_existed() -> None:
    rows = [("left", "k", "a", 1), ("left", "k", None, 2),     # no right side: nothing
            ("right", "k", "b", 3), ("left", "k", "a2", 4),     # result (a2, b)
            ("right", "k", None, 6), ("right", "k", None, 7)]   # tombstone once, then nothing
    out = run(make_spec(), rows)
    assert out == [[], [], [], [{"key": "k", "value": ["a2", "b"], "ts": 4}],
                   [{"key": "k", "value": None, "ts": 6}], []]


def test_left_join_keeps_the_left_row_when_the_right_side_is_deleted() -> None:
    rows = [("right", "k", "b", 1), ("left", "k", "a", 2), ("right", "k", None, 3),
            ("left", "k", None, 4), ("right", "k", "b5", 5)]
    out = run(make_spec("left"), rows)
    assert out == [[], [{"key": "k", "value": ["a", "b"], "ts": 2}],
                   [{"key": "k", "value": ["a", None], "ts": 3}],
                   [{"key": "k", "value": None, "ts": 4}], []]


def test_outer_join_deletes_only_when_both_sides_are_gone() -> None:
    rows = [("left", "k", "a", 1), ("right", "k", "b", 2), ("left", "k", None, 3),
            ("right", "k", None, 4), ("right", "k", None, 5)]
    out = run(make_spec("outer"), rows)
    assert out == [[{"key": "k", "value": ["a", None], "ts": 1}],
                   [{"key": "k", "value": ["a", "b"], "ts": 2}],
                   [{"key": "k", "value": [None, "b"], "ts": 3}],
                   [{"key": "k", "value": None, "ts": 4}], []]


@pytest.mark.parametrize("right", [V, U])
def test_a_deleted_other_side_holds_no_ts(right: dict[str, Any]) -> None:
    """Kafka Streams: the value getter reads a tombstone (versioned or not) as "no value", so
    only the update's ts counts, and the key's results go back in time (9, then 6)."""
    rows = [("left", "k", "a5", 5), ("right", "k", "b1", 1), ("right", "k", None, 9),
            ("left", "k", "a6", 6)]
    out = run(make_spec("left", left=V, right=right), rows)
    assert out[2:] == [[{"key": "k", "value": ["a5", None], "ts": 9}],
                       [{"key": "k", "value": ["a6", None], "ts": 6}]]


def test_the_other_sides_current_value_bounds_the_ts_even_when_older_updates_follow() -> None:
    rows = [("right", "k", "b9", 9), ("left", "k", "a2", 2), ("right", "k", "b4", 4)]
    assert run(make_spec("outer", left=V, right=V), rows)[1:] == [
        [{"key": "k", "value": ["a2", "b9"], "ts": 9}], []]   # b4 is out of order: nothing
    assert run(make_spec("outer"), rows)[1:] == [
        [{"key": "k", "value": ["a2", "b9"], "ts": 9}],
        [{"key": "k", "value": ["a2", "b4"], "ts": 4}]]       # unversioned: b4 is current


def test_keys_one_and_one_point_zero_are_two_keys() -> None:
    out = run(make_spec(), [("left", 1, "a", 1), ("right", 1.0, "b", 2), ("right", 1, "c", 3)])
    assert out == [[], [], [{"key": 1, "value": ["a", "c"], "ts": 3}]]


def test_empty_string_is_a_value_and_object_keys_join() -> None:
    key = {"id": 1, "region": "eu"}
    out = run(make_spec(), [("left", key, "", 1), ("right", {"region": "eu", "id": 1}, "b", 2)])
    assert out[1] == [{"key": {"region": "eu", "id": 1}, "value": ["", "b"], "ts": 2}]


# ---- bad input and bad config ------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "field"), [
    ({"i": 0, "side": "left", "key": "k", "value": "a"}, "ts"),
    ({"i": 0, "side": "left", "key": "k", "value": "a", "ts": "5"}, "ts"),
    ({"i": 0, "side": "left", "key": "k", "value": "a", "ts": 5.0}, "ts"),
    ({"i": 0, "side": "left", "key": "k", "value": "a", "ts": True}, "ts"),
    ({"i": 0, "key": "k", "value": "a", "ts": 5}, "side"),
    ({"i": 0, "side": "middle", "key": "k", "value": "a", "ts": 5}, "side"),
    ({"i": 0, "side": "left", "key": None, "value": "a", "ts": 5}, "key"),
    ({"i": 0, "side": "left", "key": [1], "value": "a", "ts": 5}, "key"),
    ({"i": 0, "side": "left", "key": "k", "ts": 5}, "value"),
    ({"i": 0, "side": "left", "key": "k", "value": "a", "ts": 5, "op": "put"}, "op"),
])
def test_bad_record_names_index_and_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputRecordError) as err:
        parse_table_table_join_record(raw, 3)
    assert err.value.index == 3
    assert err.value.field == field
    assert f"record 3, field '{field}'" in str(err.value)


@pytest.mark.parametrize(("config", "fragment"), [
    ({"join": "full", "left": U, "right": U}, "config.join"),
    ({"join": "inner", "left": U, "right": U, "grace_ms": 1}, "config.grace_ms: unknown key"),
    ({"join": "inner", "left": U}, "config.right: required setting is missing"),
    ({"join": "inner", "left": {"versioned": "yes"}, "right": U}, "config.left.versioned"),
    ({"join": "inner", "left": {"versioned": True}, "right": U},
     "config.left.history_retention_ms: required"),
    ({"join": "inner", "left": U, "right": {"versioned": True, "history_retention_ms": -1}},
     "config.right.history_retention_ms"),
    ({"join": "inner", "left": U, "right": {"versioned": False, "history_retention_ms": 5}},
     "config.right.history_retention_ms: only meaningful"),
    ({"join": "inner", "left": {"versioned": False, "grace": 1}, "right": U},
     "config.left.grace: unknown key"),
])
def test_bad_config_names_the_key(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        parse_spec(TableTableJoinSpec, config, operator="table_table_join")


def _write(tmp_path: Path, config: dict[str, Any], rows: list[Any]) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "operator": "table_table_join", "config": config,
                                "input": rows, "expected": [], "notes": "bad"}))
    return str(path)


@pytest.mark.parametrize(("config", "rows", "fragment"), [
    ({"join": "inner", "left": U, "right": U},
     [{"i": 0, "side": "left", "key": "k", "value": "a", "ts": "x"}], "record 0, field 'ts'"),
    ({"join": "inner", "left": U, "right": U},
     [{"i": 0, "side": "left", "key": "k", "value": "a", "ts": 1},
      {"i": 1, "key": "k", "value": "b", "ts": 2}], "record 1, field 'side'"),
    ({"join": "cross", "left": U, "right": U}, [], "config.join"),
    ({"join": "inner", "left": U, "right": U, "extra": 1}, [], "config.extra: unknown key"),
])
def test_replay_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       config: dict[str, Any], rows: list[Any],
                                       fragment: str) -> None:
    assert main(["replay", _write(tmp_path, config, rows)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert fragment in err
    assert "Traceback" not in err


# ---- properties --------------------------------------------------------------------------------

KEYS = ("k1", "k2", "k3")
VALUES = ("a", "b", "", None)
rows_strategy = st.lists(
    st.tuples(st.sampled_from(("left", "right")), st.sampled_from(KEYS), st.sampled_from(VALUES),
              st.integers(0, 12)),
    max_size=25)


def oracle_join(join: str, left: Any, right: Any) -> list[Any] | None:
    """The join of one key's two values, written independently of the processor."""
    if join == "inner":
        return [left, right] if left is not None and right is not None else None
    if join == "left":
        return [left, right] if left is not None else None
    return [left, right] if left is not None or right is not None else None


def final_input(rows: list[tuple[str, Any, Any, int]], side: str, versioned: bool
                ) -> dict[Any, tuple[Any, int]]:
    """(value, ts) per key of one side's final table: latest by arrival, or by ts (ties: later
    arrival) when versioned. A tombstone stays as value None with its ts."""
    table: dict[Any, tuple[Any, int]] = {}
    for s, k, v, t in rows:
        if s == side and (not versioned or k not in table or t >= table[k][1]):
            table[k] = (v, t)
    return table


def final_results(items: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    last: dict[Any, dict[str, Any]] = {}
    for item in items:
        last[json.dumps(item["key"])] = item
    return {k: item for k, item in last.items() if item["value"] is not None}


def check_final_table(spec: TableTableJoinSpec, rows: list[tuple[str, Any, Any, int]],
                      processor: TableTableJoinProcessor | None = None) -> None:
    items = [item for out in run(spec, rows, processor) for item in out]
    got = {k: item["value"] for k, item in final_results(items).items()}
    left = final_input(rows, "left", spec.left.versioned)
    right = final_input(rows, "right", spec.right.versioned)
    want = {}
    for key in KEYS:
        joined = oracle_join(spec.join, left.get(key, (None, 0))[0], right.get(key, (None, 0))[0])
        if joined is not None:
            want[json.dumps(key)] = joined
    assert got == want


@given(rows=rows_strategy, join=st.sampled_from(("inner", "left", "outer")),
       left_versioned=st.booleans(), right_versioned=st.booleans())
def test_final_result_is_the_join_of_the_final_input_tables(
        rows: list[tuple[str, Any, Any, int]], join: str, left_versioned: bool,
        right_versioned: bool) -> None:
    """Unversioned sides: latest by arrival; versioned sides: latest by ts, in any arrival order
    (history retention is larger than any ts gap, so nothing expires)."""
    spec = make_spec(join, V if left_versioned else U, V if right_versioned else U)
    check_final_table(spec, rows)


def last_in_order_side(rows: list[tuple[str, Any, Any, int]], key: Any,
                       versioned: dict[str, bool]) -> str | None:
    """The side of the key's last update that was not out of order on its side."""
    top: dict[str, int] = {}
    last = None
    for s, k, _v, t in rows:
        if k != key:
            continue
        if not versioned[s] or t >= top.get(s, t):
            last = s
        top[s] = max(t, top.get(s, t))
    return last


def check_final_ts(spec: TableTableJoinSpec, rows: list[tuple[str, Any, Any, int]],
                   processor: TableTableJoinProcessor | None = None) -> None:
    """A key's last result comes from its last in-order update U: its ts is max(U's ts, ts of the
    other side's current value), the other side counting only while it holds a value (a
    tombstone leaves no ts behind, as Kafka's value getter reads it as absent)."""
    versioned = {"left": spec.left.versioned, "right": spec.right.versioned}
    finals = {side: final_input(rows, side, versioned[side]) for side in ("left", "right")}
    items = [item for out in run(spec, rows, processor) for item in out]
    for key, item in final_results(items).items():
        k = json.loads(key)
        side = last_in_order_side(rows, k, versioned)
        assert side is not None
        other = finals["right" if side == "left" else "left"].get(k)
        other_ts = other[1] if other is not None and other[0] is not None else -1
        assert item["ts"] == max(finals[side][k][1], other_ts), (item, side, finals)


@given(rows=rows_strategy, join=st.sampled_from(("inner", "left", "outer")),
       left_versioned=st.booleans(), right_versioned=st.booleans())
def test_final_result_ts_follows_kafka(rows: list[tuple[str, Any, Any, int]], join: str,
                                       left_versioned: bool, right_versioned: bool) -> None:
    check_final_ts(make_spec(join, V if left_versioned else U, V if right_versioned else U), rows)


class _RemembersTombstones(TableTableJoinProcessor):
    """A mutant with this processor's former rule: a versioned side's latest tombstone still
    bounds the result ts."""

    def process(self, record: TableTableJoinRecord) -> list[dict[str, Any]]:
        items = super().process(record)
        other = self.store("right" if record.side == "left" else "left")
        times = getattr(other, "_versions", {}).get(key_id(record.key), ([], []))[0]
        return [{**item, "ts": max(item["ts"], times[-1])} for item in items] if times else items


def test_the_ts_property_catches_the_remembered_tombstone_rule() -> None:
    rows = [("left", "k1", "a", 5), ("right", "k1", "b", 1), ("right", "k1", None, 9),
            ("left", "k1", "a", 6)]
    spec = make_spec("left", V, V)
    check_final_ts(spec, rows)
    with pytest.raises(AssertionError):
        check_final_ts(spec, rows, _RemembersTombstones(spec))


class _IgnoresVersioning(TableTableJoinProcessor):
    """A mutant that joins out-of-order versioned records as if the sides were unversioned."""

    def process(self, record: TableTableJoinRecord) -> list[dict[str, Any]]:
        saved = self.metrics["out_of_order_ignored"]
        items = super().process(record)
        if self.metrics["out_of_order_ignored"] != saved:
            other = self.store("left" if record.side == "right" else "right").get(record.key)
            pair = [record.value, other.value if other else None]
            if record.side == "right":
                pair.reverse()
            items = [{"key": record.key, "value": pair, "ts": record.ts}]
        return items


def test_the_property_catches_a_processor_that_ignores_versioning() -> None:
    spec = make_spec("inner", V, V)
    items = [i for out in run(spec, PROBLEM, _IgnoresVersioning(spec)) for i in out]
    assert final_results(items)[json.dumps("k")]["value"] == ["a4", "b1"]   # not (a4, b2)
    with pytest.raises(AssertionError):
        check_final_table(spec, PROBLEM, _IgnoresVersioning(spec))


# ---- micro-batches -----------------------------------------------------------------------------

SCENARIOS = sorted(p for p in SCENARIO_DIR.glob("000_table_table_*.json"))


def test_definition_is_registered() -> None:
    assert get_operator("table_table_join") is DEFINITION
    assert DEFINITION.compacts_output


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_final_table_is_the_same_at_every_batch_size(path: Path) -> None:
    definition, spec, recs = prepare(load_scenario(path))
    finals = []
    for batch_size in (1, 2, 3, None):
        items = run_reference(definition, spec, recs, batch_size)
        finals.append({k: (v["value"], v["ts"]) for k, v in final_results(items).items()})
    assert all(f == finals[0] for f in finals), finals
