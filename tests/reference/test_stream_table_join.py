"""The `stream_table_join` reference operator (seeds 000 and 001, issue 2 §2)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from joins.cli import EXIT_INVALID, main
from joins.core.operator import BatchAware, Item
from joins.errors import ConfigError, InputRecordError
from joins.microbatch import run_batches, run_reference
from joins.operators.registry import get_operator
from joins.operators.stream_table_join import DEFINITION
from joins.operators.stream_table_join.reference import GraceBuffer, StreamTableJoinProcessor
from joins.operators.stream_table_join.spec import StreamTableJoinSpec, StreamTableRecord
from joins.scenario import compare, load_scenario
from joins.scenario.runner import prepare
from joins.spec import parse_spec
from tests.budget import mutant_search

SCENARIO_DIR = Path(__file__).parent.parent / "scenarios"
VERSIONED = {"versioned": True, "history_retention_ms": 10}

# -- helpers -----------------------------------------------------------------------------------


def make_spec(**config: Any) -> StreamTableJoinSpec:
    return parse_spec(StreamTableJoinSpec, config, operator="stream_table_join")


def records(raw: Sequence[tuple[str, Any, Any, int]]) -> list[StreamTableRecord]:
    return [DEFINITION.parse_record({"i": pos, "side": side, "key": k, "value": v, "ts": ts}, pos)
            for pos, (side, k, v, ts) in enumerate(raw)]


def run(spec: StreamTableJoinSpec, raw: Sequence[tuple[str, Any, Any, int]],
        factory: Callable[[StreamTableJoinSpec], StreamTableJoinProcessor] = StreamTableJoinProcessor,
        ) -> tuple[list[Item], dict[str, int]]:
    processor = factory(spec)
    out: list[Item] = []
    for record in records(raw):
        out.extend(processor.process(record))
    return out, processor.metrics


def J(key: Any, stream_value: Any, table_value: Any, ts: int) -> Item:
    return {"key": key, "value": [stream_value, table_value], "ts": ts}


# -- seed 000: the lookup ----------------------------------------------------------------------


@pytest.mark.parametrize("join", ["inner", "left"])
def test_versioned_table_is_looked_up_as_of_the_stream_ts(join: str) -> None:
    out, metrics = run(make_spec(join=join, table=VERSIONED), [
        ("table", "k", "a0", 0), ("table", "k", "a5", 5),
        ("stream", "k", "s3", 3), ("stream", "k", "s7", 7), ("stream", "k", "s-1", -1),
    ])
    tail = [J("k", "s-1", None, -1)] if join == "left" else []
    assert out == [J("k", "s3", "a0", 3), J("k", "s7", "a5", 7), *tail]
    assert metrics["inner_unmatched"] == (1 if join == "inner" else 0)


@pytest.mark.parametrize("join", ["inner", "left"])
def test_stream_record_older_than_history_retention_finds_nothing(join: str) -> None:
    # Seed 000: get(key, ts) beyond history retention is null; inner -> nothing, left -> null.
    out, metrics = run(make_spec(join=join, table=VERSIONED), [
        ("table", "k", "a0", 0), ("table", "k", "a5", 5), ("table", "k", "a30", 30),
        ("stream", "k", "s12", 12),
    ])
    assert out == ([J("k", "s12", None, 12)] if join == "left" else [])
    assert metrics["lookup_beyond_history_retention"] == 1


def test_unversioned_table_is_looked_up_by_latest_arrival() -> None:
    out, _ = run(make_spec(join="inner", table={"versioned": False}), [
        ("table", "k", "a5", 5), ("table", "k", "a1", 1), ("stream", "k", "s6", 6),
        ("table", "k", None, 7), ("stream", "k", "s6b", 6),
    ])
    assert out == [J("k", "s6", "a1", 6)]


def test_table_records_emit_nothing_and_tombstones_delete() -> None:
    out, _ = run(make_spec(join="left", table=VERSIONED), [
        ("table", "k", "a", 1), ("table", "k", None, 3), ("stream", "k", "s2", 2), ("stream", "k", "s4", 4),
    ])
    assert out == [J("k", "s2", "a", 2), J("k", "s4", None, 4)]


def test_empty_string_table_value_joins() -> None:
    out, _ = run(make_spec(join="inner", table=VERSIONED), [("table", "k", "", 1), ("stream", "k", "s", 2)])
    assert out == [J("k", "s", "", 2)]


def test_expired_table_put_is_counted() -> None:
    out, metrics = run(make_spec(join="left", table=VERSIONED), [
        ("table", "k", "new", 30), ("table", "k", "old", 5), ("stream", "k", "s", 6),
    ])
    assert metrics["table_expired"] == 1
    assert out == [J("k", "s", None, 6)]  # "old" was never stored; beyond retention reads null


# -- null keys, null values, table_key ---------------------------------------------------------


@pytest.mark.parametrize("join", ["inner", "left"])
def test_null_stream_value_is_skipped_and_counted(join: str) -> None:
    out, metrics = run(make_spec(join=join, table=VERSIONED),
                       [("table", "k", "a", 0), ("stream", "k", None, 1)])
    assert out == []
    assert metrics["skipped_null_value"] == 1


def test_null_stream_key_left_join_joins_to_nothing_inner_skips() -> None:
    raw = [("table", "k", "a", 0), ("stream", None, "s", 1)]
    assert run(make_spec(join="left", table=VERSIONED), raw)[0] == [J(None, "s", None, 1)]
    out, metrics = run(make_spec(join="inner", table=VERSIONED), raw)
    assert out == []
    assert metrics["skipped_null_key"] == 1


def test_table_record_with_null_key_is_skipped_and_counted() -> None:
    out, metrics = run(make_spec(join="left", table=VERSIONED),
                       [("table", None, "a", 0), ("stream", None, "s", 1)])
    assert out == [J(None, "s", None, 1)]
    assert metrics["table_skipped_null_key"] == 1


def test_table_key_reads_a_field_of_the_stream_value() -> None:
    order = {"customer": "c1", "amount": 5}
    raw = [("table", "c1", "Alice", 0), ("stream", "o1", order, 1),
           ("stream", "o2", {"customer": None}, 2), ("stream", "o3", {"amount": 1}, 3),
           ("stream", None, order, 4)]
    left, _ = run(make_spec(join="left", table=VERSIONED, table_key="customer"), raw)
    assert left == [J("o1", order, "Alice", 1), J("o2", {"customer": None}, None, 2),
                    J("o3", {"amount": 1}, None, 3), J(None, order, "Alice", 4)]
    inner, metrics = run(make_spec(join="inner", table=VERSIONED, table_key="customer"), raw)
    assert inner == [J("o1", order, "Alice", 1), J(None, order, "Alice", 4)]
    assert metrics["skipped_null_key"] == 2


def test_table_key_on_a_value_that_is_not_an_object_names_the_record() -> None:
    with pytest.raises(InputRecordError) as info:
        run(make_spec(join="left", table=VERSIONED, table_key="customer"), [("stream", "o1", "c1", 1)])
    assert info.value.index == 0
    assert info.value.field == "value"
    assert "customer" in str(info.value)


# -- seed 001: the grace buffer ----------------------------------------------------------------

SEED_001_TABLE = [("table", 1, "a", 1), ("table", 2, "b", 1), ("table", 3, "c", 1),
                  ("table", 1, "a", 2), ("table", 2, "x", 2), ("table", 3, "c", 2),
                  ("table", 1, "a", 3), ("table", 2, "x", 3), ("table", 3, "y", 3)]
SEED_001_STREAM = [("stream", 1, "d", 4), ("stream", 2, "e", 1), ("stream", 3, "f", 2),
                   ("stream", 2, "g", 2), ("stream", 3, "h", 3)]
SEED_001_BUFFERED = [J(2, "e", "b", 1), J(3, "f", "c", 2), J(2, "g", "x", 2), J(3, "h", "y", 3),
                     J(1, "d", "a", 4)]


def test_seed_001_with_grace_evicts_in_ts_order_and_nothing_flushes_at_end() -> None:
    spec = make_spec(join="inner", table=VERSIONED, grace_ms=10)
    out, metrics = run(spec, SEED_001_TABLE[:3] + SEED_001_STREAM + SEED_001_TABLE[3:])
    assert out == []
    assert metrics["buffered"] == 5
    out, metrics = run(spec, SEED_001_TABLE[:3] + SEED_001_STREAM + SEED_001_TABLE[3:]
                       + [("stream", 9, "z", 14)])
    assert out == SEED_001_BUFFERED
    assert metrics["buffered"] == 1


def test_seed_001_without_grace_depends_on_arrival() -> None:
    versioned = make_spec(join="inner", table=VERSIONED)
    out, _ = run(versioned, SEED_001_TABLE[:3] + SEED_001_STREAM + SEED_001_TABLE[3:])
    assert out == [J(1, "d", "a", 4), J(2, "e", "b", 1), J(3, "f", "c", 2), J(2, "g", "b", 2),
                   J(3, "h", "c", 3)]
    out, _ = run(make_spec(join="inner", table={"versioned": False}), SEED_001_TABLE + SEED_001_STREAM)
    assert out == [J(1, "d", "a", 4), J(2, "e", "x", 1), J(3, "f", "y", 2), J(2, "g", "x", 2),
                   J(3, "h", "y", 3)]


def test_buffered_record_is_joined_with_the_table_at_eviction() -> None:
    out, _ = run(make_spec(join="left", table=VERSIONED, grace_ms=5), [
        ("stream", "k", "s1", 1),          # buffered: the table is still empty
        ("table", "k", "a0", 0),           # arrives later, but before eviction
        ("stream", "k", "s6", 6),          # stream time 6, evicts ts <= 1
    ])
    assert out == [J("k", "s1", "a0", 1)]


def test_equal_ts_evicted_in_arrival_order() -> None:
    out, _ = run(make_spec(join="left", table=VERSIONED, grace_ms=0), [
        ("stream", "b", "first", 5), ("stream", "a", "second", 5),
    ])
    assert [o["value"][0] for o in out] == ["first", "second"]
    out, _ = run(make_spec(join="left", table=VERSIONED, grace_ms=3), [
        ("stream", "b", "first", 5), ("stream", "a", "second", 5), ("stream", "c", "early", 4),
        ("stream", "z", "flush", 8),
    ])
    assert [o["value"][0] for o in out] == ["early", "first", "second"]


def test_buffer_stream_time_moves_only_with_buffered_stream_records() -> None:
    spec = make_spec(join="inner", table=VERSIONED, grace_ms=2, late="drop")
    out, metrics = run(spec, [
        ("table", "k", "a", 0),
        ("stream", "k", "x", 10),     # stream time 10
        ("table", "k2", "q", 12),     # a table ts does not move it
        ("stream", "k", None, 40),    # nor a skipped null value
        ("stream", "k", "late", 5),   # nor a late record (and this one is dropped)
        ("stream", "k", "z", 8),      # 8 = 10 - 2 is not late: evicted at once
    ])
    assert out == [J("k", "z", "a", 8)]
    assert metrics["late_dropped"] == 1
    assert metrics["skipped_null_value"] == 1


def test_grace_buffer_unit() -> None:
    buffer = GraceBuffer(3)
    assert not buffer.is_late(-100)  # no stream time yet: nothing is late
    first, second = records([("stream", "a", "v", 10), ("stream", "a", "w", 7)])
    buffer.put(first, "a")
    assert buffer.evict() == []
    assert buffer.is_late(6) and not buffer.is_late(7)
    buffer.put(second, "a")
    assert [r.i for r, _ in buffer.evict()] == [1]
    assert len(buffer) == 1
    assert buffer.stream_time == 10


@pytest.mark.parametrize("policy", ["join", "drop", "quarantine"])
def test_late_policies(policy: str) -> None:
    spec = make_spec(join="inner", table=VERSIONED, grace_ms=2, late=policy)
    out, metrics = run(spec, [("table", "k", "a", 0), ("stream", "k", "x", 10), ("stream", "k", "y", 5)])
    if policy == "join":
        assert out == [J("k", "y", "a", 5)]
        assert metrics["late_joined"] == 1
    elif policy == "drop":
        assert out == []
        assert metrics["late_dropped"] == 1
    else:
        assert len(out) == 1
        assert out[0]["quarantined"] == {"key": "k", "value": "y", "ts": 5}
        reason = out[0]["reason"]
        assert reason == (
            "late stream record: ts 1970-01-01T00:00:00.005Z is older than the join buffer's "
            "stream time 1970-01-01T00:00:00.010Z minus grace 2 ms (= 1970-01-01T00:00:00.008Z); "
            "records up to it may already have been joined, so this one can no longer be joined "
            "in timestamp order. A grace_ms of at least 5 would have joined it")
        assert metrics["quarantined"] == 1
    assert metrics["buffered"] == 1  # x@10 still waits: nothing flushes at end of input


def test_late_default_is_join() -> None:
    assert make_spec(join="inner", table=VERSIONED, grace_ms=2).late == "join"


def test_grace_zero_passes_in_order_records_at_once() -> None:
    spec = make_spec(join="inner", table=VERSIONED, grace_ms=0, late="drop")
    out, metrics = run(spec, [("table", "k", "a", 0), ("stream", "k", "s1", 1), ("stream", "k", "s1b", 1),
                              ("stream", "k", "s0", 0)])
    assert out == [J("k", "s1", "a", 1), J("k", "s1b", "a", 1)]
    assert metrics["late_dropped"] == 1
    assert metrics["buffered"] == 0


# -- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "fragment"), [
    ({"join": "inner", "table": {"versioned": False}, "grace_ms": 5},
     "config.grace_ms: a grace period needs"),
    ({"join": "inner", "table": {"versioned": True, "history_retention_ms": 5}, "grace_ms": 6},
     "grace_ms (6) must be <= table.history_retention_ms (5)"),
    ({"join": "inner", "table": VERSIONED, "late": "drop"}, "config.late: late = 'drop' needs grace_ms"),
    ({"join": "inner", "table": VERSIONED, "late": "quarantine"}, "config.late"),
    ({"join": "outer", "table": VERSIONED}, "config.join"),
    ({"join": "right", "table": VERSIONED}, "config.join"),
    ({"table": VERSIONED}, "config.join: required"),
    ({"join": "inner"}, "config.table: required"),
    ({"join": "inner", "table": VERSIONED, "grace": 5}, "config.grace: unknown key"),
    ({"join": "inner", "table": {"versioned": True, "history_retention_ms": 5, "x": 1}},
     "config.table.x: unknown key"),
    ({"join": "inner", "table": {"versioned": True}}, "config.table.history_retention_ms: required"),
    ({"join": "inner", "table": {"versioned": False, "history_retention_ms": 5}},
     "config.table.history_retention_ms: only meaningful"),
    ({"join": "inner", "table": {"versioned": "yes", "history_retention_ms": 5}}, "config.table.versioned"),
    ({"join": "inner", "table": VERSIONED, "grace_ms": -1}, "config.grace_ms"),
    ({"join": "inner", "table": VERSIONED, "grace_ms": "5"}, "config.grace_ms"),
    ({"join": "inner", "table": VERSIONED, "grace_ms": 2, "late": "skip"}, "config.late"),
    ({"join": "inner", "table": VERSIONED, "table_key": ""}, "config.table_key"),
    ({"join": "inner", "table": VERSIONED, "table_key": 3}, "config.table_key"),
])
def test_bad_config_names_the_key(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_spec(**config)
    assert fragment in str(info.value)
    assert str(info.value).startswith("stream_table_join: invalid config")


def test_a_bad_config_is_said_as_a_pipeline_spec_says_it() -> None:
    # One wording for every spec (joins.spec.config_problem): no pydantic prefix, no mapping
    # echoed back, a misspelt choice's near miss.
    with pytest.raises(ConfigError) as info:
        make_spec(join={"how": "inner"}, table=VERSIONED, late="drp", grace_ms=1)
    assert str(info.value) == (
        "stream_table_join: invalid config: config.join: Input should be 'inner' or 'left'; "
        "config.late: Input should be 'join', 'drop' or 'quarantine' (got 'drp') (did you mean `drop`?)")


def test_good_configs() -> None:
    make_spec(join="left", table={"versioned": False})
    make_spec(join="inner", table=VERSIONED, grace_ms=10, late="quarantine", table_key="f")
    make_spec(join="inner", table=VERSIONED, late="join")  # the default, stated explicitly


@pytest.mark.parametrize(("raw", "field"), [
    ({"side": "stream", "key": "k", "value": "v"}, "ts"),
    ({"side": "stream", "key": "k", "value": "v", "ts": "5"}, "ts"),
    ({"side": "stream", "key": "k", "value": "v", "ts": 1.5}, "ts"),
    ({"side": "table", "key": "k", "value": "v", "ts": False}, "ts"),
    ({"side": "stream", "key": "k", "ts": 1}, "value"),
    ({"side": "stream", "value": "v", "ts": 1}, "key"),
    ({"side": "left", "key": "k", "value": "v", "ts": 1}, "side"),
    ({"key": "k", "value": "v", "ts": 1}, "side"),
    ({"side": "stream", "key": "k", "value": "v", "ts": 1, "as_of": 2}, "as_of"),
])
def test_bad_record_names_index_and_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputRecordError) as info:
        DEFINITION.parse_record({"i": 4, **raw}, 4)
    assert (info.value.index, info.value.field) == (4, field)
    assert f"record 4, field '{field}'" in str(info.value)


def _write(tmp_path: Path, config: dict[str, Any], inputs: list[dict[str, Any]]) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "operator": "stream_table_join", "config": config,
                                "input": inputs, "expected": [{"key": "k"}], "notes": "bad input"}))
    return path


OK_CONFIG = {"join": "inner", "table": VERSIONED}


@pytest.mark.parametrize(("config", "inputs", "fragment"), [
    (OK_CONFIG, [{"i": 0, "side": "stream", "key": "k", "value": "v"}], "record 0, field 'ts'"),
    (OK_CONFIG, [{"i": 0, "side": "table", "key": "k", "value": "v", "ts": 0},
                 {"i": 1, "side": "stream", "key": "k", "value": "v", "ts": "5"}], "record 1, field 'ts'"),
    (OK_CONFIG, [{"i": 0, "side": "stream", "key": "k", "value": "v", "ts": 1.5}], "record 0, field 'ts'"),
    ({**OK_CONFIG, "join": "outer"}, [], "config.join"),
    ({**OK_CONFIG, "windw": 1}, [], "config.windw: unknown key"),
    ({**OK_CONFIG, "table_key": "c"}, [{"i": 0, "side": "stream", "key": "k", "value": 7, "ts": 1}],
     "record 0, field 'value'"),
])
def test_cli_exits_2_with_a_message_and_no_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any],
        inputs: list[dict[str, Any]], fragment: str) -> None:
    for args in ([], ["--check"]):
        code = main(["replay", str(_write(tmp_path, config, inputs)), *args])
        err = capsys.readouterr().err
        assert code == EXIT_INVALID, err
        assert fragment in err
        assert "Traceback" not in err


def test_definition_and_micro_batch_phase() -> None:
    assert get_operator("stream_table_join") is DEFINITION
    assert DEFINITION.compacts_output is False
    table, stream = records([("table", "k", "a", 0), ("stream", "k", "s", 0)])
    assert DEFINITION.batch_phase(table) < DEFINITION.batch_phase(stream)


# -- the micro-batch rule over the scenario files ----------------------------------------------

MY_SCENARIOS = sorted([*SCENARIO_DIR.glob("000_stream_table_*.json"), *SCENARIO_DIR.glob("001_*.json"),
                       *SCENARIO_DIR.glob("versioned_table_*.json")])
RUNNABLE = [p for p in MY_SCENARIOS if load_scenario(p).expected_error is None]


def _table_side_first(batch: Sequence[Any]) -> list[Any]:
    # The rule stated independently of DEFINITION.batch_phase. Only stream_table_join has sides.
    table = [r for r in batch if getattr(r, "side", "table") == "table"]
    return table + [r for r in batch if getattr(r, "side", "table") != "table"]


@pytest.mark.parametrize("path", RUNNABLE, ids=[p.stem for p in RUNNABLE])
def test_scenario_micro_batches(path: Path) -> None:
    scenario = load_scenario(path)
    definition, spec, recs = prepare(scenario)
    # Batch size 1 is record-at-a-time processing, and it is what the scenario pins.
    processor = definition.reference(spec)
    one_at_a_time = [{**item, "after_input": r.i} for r in recs for item in processor.process(r)]
    assert run_reference(definition, spec, recs, 1) == one_at_a_time
    assert compare(scenario.expected, one_at_a_time, scenario.expected_mode) is None
    for size in range(2, len(recs) + 1):
        processor = definition.reference(spec)
        expected: list[Item] = []
        aware = processor if isinstance(processor, BatchAware) else None
        for start in range(0, len(recs), size):
            batch = recs[start:start + size]
            if aware is not None:
                aware.begin_batch()   # the batch's lookups keep the retention clock of its start
            expected.extend({**item, "after_input": batch[-1].i}
                            for r in _table_side_first(batch) for item in processor.process(r))
            if aware is not None:
                aware.end_batch()
        assert run_reference(definition, spec, recs, size) == expected, f"batch size {size}"


def test_whole_input_as_one_batch_applies_table_first() -> None:
    # Seed 001's "stream before table versions" arrival, one micro-batch: the table is complete
    # before any stream record is joined, so even without grace the result is the as-of join.
    spec = make_spec(join="inner", table=VERSIONED)
    recs = records(SEED_001_TABLE[:3] + SEED_001_STREAM + SEED_001_TABLE[3:])
    out = run_reference(DEFINITION, spec, recs, None)
    assert [{k: v for k, v in o.items() if k != "after_input"} for o in out] == [
        J(1, "d", "a", 4), J(2, "e", "b", 1), J(3, "f", "c", 2), J(2, "g", "x", 2), J(3, "h", "y", 3)]


# -- property tests ----------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c", None])
TABLE_VALUES = st.sampled_from(["x", "y", "", None])


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def brute_force_as_of(table: Sequence[tuple[str, Any, Any, int]], stream: Sequence[tuple[str, Any, Any, int]],
                      join: str) -> list[Item]:
    """For each stream record, the table value put last among those with the largest ts <= its ts."""
    out: list[Item] = []
    for _, key, value, ts in stream:
        if value is None:
            continue
        found = None
        if key is not None:
            versions = [(t, pos, v) for pos, (_, k, v, t) in enumerate(table) if k == key and t <= ts]
            found = max(versions)[2] if versions else None
        if found is None and join == "inner":
            continue
        out.append(J(key, value, found, ts))
    return out


@st.composite
def table_then_stream(draw: st.DrawFn, max_ts: int = 20) -> tuple[list[Any], list[Any]]:
    table = draw(st.lists(st.tuples(st.just("table"), KEYS, TABLE_VALUES, st.integers(0, max_ts)),
                          max_size=12))
    n = draw(st.integers(0, 12))
    # Distinct stream values make a wrong pairing visible; about one in three is a null value.
    stream = [("stream", draw(KEYS), draw(st.sampled_from([f"s{j}", f"s{j}", None])),
               draw(st.integers(0, max_ts))) for j in range(n)]
    return table, stream


class _LatestLookup(StreamTableJoinProcessor):
    """Mutant: joins the latest version, ignoring the stream timestamp (the pre-KIP-914 lookup)."""

    def _lookup(self, table_key: Any, ts: int) -> Any:
        found = self.table.get(table_key)
        return None if found is None else found.value


def _property_a_holds(case: tuple[str, int, tuple[list[Any], list[Any]]],
                      factory: Callable[[StreamTableJoinSpec], StreamTableJoinProcessor]) -> bool:
    join, extra, (table, stream) = case
    spec = make_spec(join=join, table={"versioned": True, "history_retention_ms": 21 + extra})
    return run(spec, table + stream, factory)[0] == brute_force_as_of(table, stream, join)


PROPERTY_A = st.tuples(st.sampled_from(["inner", "left"]), st.integers(0, 10), table_then_stream())


@given(PROPERTY_A)
def test_property_a_versioned_join_equals_brute_force_as_of_join(
        case: tuple[str, int, tuple[list[Any], list[Any]]]) -> None:
    # (a) whole table first, history retention longer than the data's time span (0..20), no grace.
    assert _property_a_holds(case, StreamTableJoinProcessor)


def test_property_a_catches_the_latest_lookup_mutant() -> None:
    find(PROPERTY_A, lambda case: not _property_a_holds(case, _LatestLookup),
         settings=mutant_search(2000))


@st.composite
def permuted_stream(draw: st.DrawFn) -> dict[str, Any]:
    table = draw(st.lists(st.tuples(st.just("table"), KEYS, TABLE_VALUES, st.integers(0, 30)), max_size=10))
    stream = [("stream", draw(KEYS), draw(st.sampled_from([f"s{j}", None])), draw(st.integers(0, 20)))
              for j in range(draw(st.integers(1, 10)))]
    stream_ts = [r[3] for r in stream]
    # Grace covers the largest out-of-orderness of ANY arrival order of this stream.
    grace = max(stream_ts) - min(stream_ts) + draw(st.integers(0, 3))
    return {"table": table, "stream": stream, "permuted": draw(st.permutations(stream)), "grace": grace,
            "retention": grace + draw(st.integers(0, 40)), "join": draw(st.sampled_from(["inner", "left"])),
            "late": draw(st.sampled_from(["join", "drop", "quarantine"]))}


Factory = Callable[[StreamTableJoinSpec], StreamTableJoinProcessor]


def _run_b(case: dict[str, Any], stream: list[Any], factory: Factory) -> tuple[Counter[str], dict[str, int]]:
    spec = make_spec(join=case["join"], grace_ms=case["grace"], late=case["late"],
                     table={"versioned": True, "history_retention_ms": case["retention"]})
    # Nothing flushes at end of input: a last record far enough ahead evicts every other one.
    flush = ("stream", "flush", "flush", max(r[3] for r in stream) + case["grace"])
    out, metrics = run(spec, case["table"] + stream + [flush], factory)
    # With grace 0 the flush record evicts itself too: it is the test's, not the data's.
    return Counter(_canon(item) for item in out if item.get("key") != "flush"), metrics


def _property_b_holds(case: dict[str, Any],
                      factory: Callable[[StreamTableJoinSpec], StreamTableJoinProcessor]) -> bool:
    original, metrics = _run_b(case, case["stream"], factory)
    permuted, _ = _run_b(case, case["permuted"], factory)
    if original != permuted:
        return False
    if metrics["late_joined"] + metrics["late_dropped"] + metrics["quarantined"] != 0:
        return False
    if case["retention"] > 30:
        # History covers all the data: the buffered join is the as-of join, whatever the order.
        expected = brute_force_as_of(case["table"], case["stream"], case["join"])
        return original == Counter(_canon(item) for item in expected)
    return True


@given(permuted_stream())
def test_property_b_grace_makes_results_independent_of_stream_arrival_order(case: dict[str, Any]) -> None:
    # (b) whole table first, grace >= the stream's largest out-of-orderness: the multiset of
    # results does not depend on the stream's arrival order (and no record is late).
    assert _property_b_holds(case, StreamTableJoinProcessor)


class _LateAtTheBound(StreamTableJoinProcessor):
    """Mutant: treats a record exactly at stream time minus grace as late."""

    def __init__(self, spec: StreamTableJoinSpec) -> None:
        super().__init__(spec)
        if self.buffer is not None:
            buffer = self.buffer
            buffer.is_late = lambda ts: buffer.late_bound is not None and ts <= buffer.late_bound  # type: ignore[method-assign]


class _JoinAtStreamTime(StreamTableJoinProcessor):
    """Mutant: joins a buffered record as of the buffer's stream time instead of its own ts."""

    def _join(self, record: StreamTableRecord, table_key: Any) -> list[Item]:
        assert self.buffer is not None
        ts = self.buffer.stream_time if self.buffer.stream_time is not None else record.ts
        shifted = record.model_copy(update={"ts": ts})
        return [{**item, "ts": record.ts} for item in super()._join(shifted, table_key)]


@pytest.mark.parametrize("mutant", [_LateAtTheBound, _JoinAtStreamTime])
def test_property_b_catches_mutants(mutant: Factory) -> None:
    find(permuted_stream(), lambda case: not _property_b_holds(case, mutant),
         settings=mutant_search(3000))


# -- catch-up: a batch covering many retention periods (issue 25) -------------------------------


@st.composite
def catch_up(draw: st.DrawFn) -> dict[str, Any]:
    """Orderly data spanning many history retentions: table records in event-time order (none
    expires at put), stream records in any order, the whole table landed before the stream (a
    new join over existing data) or interleaved with it by event time (a pipeline catching up)."""
    n_table = draw(st.integers(0, 12))
    table_ts = sorted(draw(st.lists(st.integers(0, 60), min_size=n_table, max_size=n_table)))
    table = [("table", draw(KEYS), draw(TABLE_VALUES), t) for t in table_ts]
    n = draw(st.integers(0, 12))
    stream = [("stream", draw(KEYS), draw(st.sampled_from([f"s{j}", None])),
               draw(st.integers(0, 60))) for j in range(n)]
    return {"join": draw(st.sampled_from(["inner", "left"])), "retention": draw(st.integers(0, 8)),
            "table": table, "stream": stream}


class _TableClockRunsAhead(StreamTableJoinProcessor):
    """Mutant: a batch's lookups judge retention against the table's stream time after its
    records (the rule before issue 25), so a batch covering days loses the early ones."""

    def begin_batch(self) -> None:
        pass


def _catch_up_holds(case: dict[str, Any],
                    factory: Callable[[StreamTableJoinSpec], StreamTableJoinProcessor]) -> bool:
    spec = make_spec(join=case["join"],
                     table={"versioned": True, "history_retention_ms": case["retention"]})
    definition = DEFINITION if factory is StreamTableJoinProcessor else \
        dataclasses.replace(DEFINITION, reference=factory)
    recs = records(case["table"] + case["stream"])
    got = [{k: v for k, v in item.items() if k != "after_input"}
           for item in run_reference(definition, spec, recs, None)]
    return got == brute_force_as_of(case["table"], case["stream"], case["join"])


@given(catch_up())
def test_one_batch_over_many_retention_periods_equals_the_as_of_join_of_all_history(
        case: dict[str, Any]) -> None:
    # What a backfill computes: every stream record as of its ts against the whole history.
    assert _catch_up_holds(case, StreamTableJoinProcessor)


def test_catch_up_property_catches_the_table_clock_running_ahead() -> None:
    find(catch_up(), lambda case: not _catch_up_holds(case, _TableClockRunsAhead),
         settings=mutant_search(3000))


@given(catch_up(), st.integers(0, 24), st.sampled_from([None, 0]))
def test_a_pipeline_resumed_after_a_pause_equals_one_that_never_stopped(
        case: dict[str, Any], paused_at: int, grace: int | None) -> None:
    # Records arrive in event-time order (table first on a tie); one run takes them one by one,
    # the other stops after `paused_at` of them and catches up on the rest in one batch.
    # (With grace > 0 the run that never stopped can be the one that loses: a buffered record
    # released by a stream record far ahead is looked up after the table ran past it by more
    # than retention, as in Kafka Streams; the catch-up batch answers it as a backfill does.)
    ordered = sorted(case["table"] + case["stream"], key=lambda r: (r[3], r[0] != "table"))
    spec = make_spec(join=case["join"], grace_ms=grace,
                     table={"versioned": True, "history_retention_ms": max(case["retention"], grace or 0)})
    recs = records(ordered)
    stopped = list(recs[:paused_at]), list(recs[paused_at:])

    def strip(items: list[Item]) -> list[str]:
        return sorted(_canon({k: v for k, v in i.items() if k != "after_input"}) for i in items)

    never_stopped = run_reference(DEFINITION, spec, recs, 1)
    resumed = run_batches(DEFINITION, spec, [b for b in [*_ones(stopped[0]), stopped[1]] if b])
    assert strip(resumed) == strip(never_stopped)


def _ones(recs: Sequence[Any]) -> list[list[Any]]:
    return [[r] for r in recs]
