"""The versioned store and the `versioned_table` reference operator (seeds 000/002, issue 2 §1)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from joins.cli import EXIT_INVALID, main
from joins.core.keys import key_id
from joins.core.operator import Item
from joins.core.store import (
    KeyValueStore,
    PutResult,
    VersionedRecord,
    VersionedStore,
    make_store,
)
from joins.errors import ConfigError, InputRecordError
from joins.operators.versioned_table import DEFINITION
from joins.operators.versioned_table.reference import VersionedTableProcessor
from joins.operators.versioned_table.spec import GetOp, PutOp, VersionedTableSpec
from joins.spec import parse_spec
from tests.budget import mutant_search

# -- helpers -----------------------------------------------------------------------------------


def run_ops(retention: int, ops: list[dict[str, Any]]) -> tuple[list[Item], dict[str, int]]:
    spec = parse_spec(VersionedTableSpec, {"history_retention_ms": retention}, operator="versioned_table")
    processor = VersionedTableProcessor(spec)
    out: list[Item] = []
    for pos, raw in enumerate(ops):
        out.extend(processor.process(DEFINITION.parse_record({"i": pos, **raw}, pos)))
    return out, processor.metrics


def put(key: Any, value: Any, ts: int) -> dict[str, Any]:
    return {"op": "put", "key": key, "value": value, "ts": ts}


def get(key: Any, as_of: int | None = None) -> dict[str, Any]:
    return {"op": "get", "key": key, "as_of": as_of}


# -- store rules -------------------------------------------------------------------------------


def test_stream_time_is_store_wide_and_older_puts_expire() -> None:
    store = VersionedStore(10)
    assert store.put("a", "a10", 10) == PutResult("latest")
    assert store.put("b", "b25", 25) == PutResult("latest")
    assert store.stream_time == 25
    # Key a never saw a ts above 10, but the store's stream time is 25: bound 15.
    assert store.put("a", "a14", 14) == PutResult("expired", VersionedRecord("a10", 10, None))
    assert store.get("a") == VersionedRecord("a10", 10, None)


def test_expired_put_does_not_move_stream_time() -> None:
    store = VersionedStore(5)
    store.put("a", "x", 100)
    store.put("a", "old", 3)
    assert store.stream_time == 100


def test_put_at_the_bound_is_stored_one_below_is_not() -> None:
    store = VersionedStore(10)
    store.put("a", "a20", 20)
    a20 = VersionedRecord("a20", 20, None)
    assert store.put("a", "a10", 10) == PutResult("out_of_order", a20, valid_to=20)
    assert store.put("a", "a9", 9) == PutResult("expired", a20)
    assert store.put("b", "b10", 10) == PutResult("latest")
    assert store.get("a", 10) == VersionedRecord("a10", 10, 20)


def test_equal_ts_replaces_and_counts_as_latest() -> None:
    store = VersionedStore(100)
    store.put("a", "x", 5)
    assert store.put("a", "y", 5) == PutResult("latest", VersionedRecord("x", 5, None))
    assert store.get("a", 5) == VersionedRecord("y", 5, None)
    # value -> tombstone
    assert store.put("a", None, 5) == PutResult("latest", VersionedRecord("y", 5, None))
    assert store.get("a", 5) is None
    assert store.get("a") is None
    assert store.put("a", "z", 5) == PutResult("latest")  # tombstone -> value (none before)
    assert store.get("a") == VersionedRecord("z", 5, None)


def test_equal_ts_replaces_a_history_version() -> None:
    store = VersionedStore(100)
    store.put("a", "z", 5)
    z = VersionedRecord("z", 5, None)  # stays the current value: history puts do not replace it
    assert store.put("a", "p", 3) == PutResult("out_of_order", z, valid_to=5)
    assert store.put("a", "q", 3) == PutResult("out_of_order", z, valid_to=5)
    assert store.get("a", 4) == VersionedRecord("q", 3, 5)
    assert store.put("a", None, 3) == PutResult("out_of_order", z, valid_to=5)
    assert store.get("a", 4) is None


def test_get_as_of_reads_largest_valid_from_not_after_as_of() -> None:
    store = VersionedStore(100)
    for value, ts in [("a1", 1), ("a5", 5), ("a3", 3)]:
        store.put("k", value, ts)
    assert store.get("k", 0) is None
    assert store.get("k", 1) == VersionedRecord("a1", 1, 3)
    assert store.get("k", 2) == VersionedRecord("a1", 1, 3)
    assert store.get("k", 3) == VersionedRecord("a3", 3, 5)
    assert store.get("k", 99) == VersionedRecord("a5", 5, None)
    assert store.get("unknown", 3) is None


def test_tombstone_version_reads_null_and_ends_the_previous_validity() -> None:
    store = VersionedStore(100)
    store.put("k", "v", 1)
    store.put("k", None, 3)
    store.put("k", "w", 5)
    assert store.get("k", 2) == VersionedRecord("v", 1, 3)
    assert store.get("k", 3) is None
    assert store.get("k", 4) is None
    assert store.get("k", 5) == VersionedRecord("w", 5, None)


def test_beyond_history_retention_only_the_latest_version_answers() -> None:
    store = VersionedStore(10)
    store.put("a", "v0", 0)
    store.put("b", "w100", 100)  # bound 90
    assert store.get("a", 50) == VersionedRecord("v0", 0, None)  # the latest never expires
    store.put("a", "v95", 95)
    assert store.get("a", 50) is None  # v0 is now history older than the bound
    assert store.get("a", 89) is None
    assert store.get("a", 90) == VersionedRecord("v0", 0, 95)  # the bound itself is answered


def test_latest_tombstone_beyond_retention_reads_null() -> None:
    store = VersionedStore(10)
    store.put("e", "e0", 0)
    store.put("e", None, 1)
    store.put("b", "w", 100)
    assert store.get("e", 50) is None
    assert store.get("e", 0) is None


def test_empty_string_is_a_value_never_a_tombstone() -> None:
    store = VersionedStore(10)
    store.put("a", "", 1)
    assert store.get("a") == VersionedRecord("", 1, None)
    store.put("a", None, 2)
    assert store.get("a") is None
    assert store.get("a", 1) == VersionedRecord("", 1, 2)


def test_json_keys_true_one_one_point_zero_and_string_one_are_distinct_objects_unordered() -> None:
    store = VersionedStore(10)
    store.put(True, "T", 1)
    store.put(1, "one", 1)
    store.put(1.0, "one point zero", 1)
    store.put("1", "str", 1)
    store.put({"id": 1, "r": "eu"}, "obj", 1)
    assert store.get(True) == VersionedRecord("T", 1, None)
    assert store.get(1) == VersionedRecord("one", 1, None)
    assert store.get(1.0) == VersionedRecord("one point zero", 1, None)
    assert store.get("1") == VersionedRecord("str", 1, None)
    assert store.get({"r": "eu", "id": 1}) == VersionedRecord("obj", 1, None)
    assert store.get({"r": "eu", "id": 1.0}) is None
    kv = KeyValueStore()
    kv.put(False, "F", 1)
    kv.put(2.0, "two point zero", 1)
    assert kv.get(0) is None
    assert kv.get(2) is None
    assert kv.get(2.0) == VersionedRecord("two point zero", 1, None)


def test_key_value_store_is_latest_by_arrival_and_tombstone_deletes() -> None:
    store = make_store(False, 0)
    assert not store.is_versioned
    store.put("k", "a5", 5)
    # never expired, never history; the previous value is the previous by arrival
    assert store.put("k", "a1", 1) == PutResult("latest", VersionedRecord("a5", 5, None))
    assert store.get("k", 5) == VersionedRecord("a1", 1, None)  # as_of is ignored
    store.put("k", None, 7)
    assert store.get("k") is None
    assert make_store(True, 3).is_versioned


def test_negative_retention_is_refused_by_the_store() -> None:
    with pytest.raises(ValueError, match="history_retention_ms"):
        VersionedStore(-1)


# -- the operator ------------------------------------------------------------------------------


def test_operator_items_and_expired_metric() -> None:
    items, metrics = run_ops(10, [
        put("a", "x", 10), put("b", "y", 25), put("a", "old", 3), put("a", "h", 20),
        put("a", "h2", 15), get("a", 17), get("a"), get("zz"),
    ])
    assert items == [
        {"put": "latest"}, {"put": "latest"}, {"put": "expired"}, {"put": "latest"},
        {"put": {"valid_to": 20}},
        {"get": {"value": "h2", "valid_from": 15, "valid_to": 20}},
        {"get": {"value": "h", "valid_from": 20, "valid_to": None}},
        {"get": None},
    ]
    assert metrics == {"put_expired": 1}


def test_get_without_as_of_reads_latest() -> None:
    items, _ = run_ops(10, [put("a", "x", 1), put("a", "y", 2), {"op": "get", "key": "a"}])
    assert items[-1] == {"get": {"value": "y", "valid_from": 2, "valid_to": None}}


def test_definition_shape() -> None:
    assert DEFINITION.name == "versioned_table"
    assert DEFINITION.spec_type is VersionedTableSpec
    assert DEFINITION.compacts_output is False
    assert isinstance(DEFINITION.parse_record({"i": 0, **put("a", 1, 1)}, 0), PutOp)
    assert isinstance(DEFINITION.parse_record({"i": 0, **get("a", 1)}, 0), GetOp)


# -- bad config and bad input ------------------------------------------------------------------


@pytest.mark.parametrize(("config", "fragment"), [
    ({"history_retention_ms": 10, "grace_ms": 5}, "config.grace_ms: unknown key"),
    ({}, "config.history_retention_ms: required"),
    ({"history_retention_ms": -1}, "config.history_retention_ms"),
    ({"history_retention_ms": "10"}, "config.history_retention_ms"),
    ({"history_retention_ms": 1.5}, "config.history_retention_ms"),
])
def test_bad_config_names_the_key(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        parse_spec(VersionedTableSpec, config, operator="versioned_table")


@pytest.mark.parametrize(("raw", "field"), [
    ({"op": "put", "key": "a", "value": "x"}, "ts"),
    ({"op": "put", "key": "a", "value": "x", "ts": "5"}, "ts"),
    ({"op": "put", "key": "a", "value": "x", "ts": 1.5}, "ts"),
    ({"op": "put", "key": "a", "value": "x", "ts": True}, "ts"),
    ({"op": "put", "key": "a", "ts": 1}, "value"),
    ({"op": "put", "key": None, "value": "x", "ts": 1}, "key"),
    ({"op": "put", "value": "x", "ts": 1}, "key"),
    ({"op": "put", "key": "a", "value": "x", "ts": 1, "as_of": 3}, "as_of"),
    ({"op": "get", "key": "a", "as_of": "3"}, "as_of"),
    ({"op": "get", "key": "a", "ts": 3}, "ts"),
    ({"op": "delete", "key": "a"}, "op"),
    ({"key": "a", "value": "x", "ts": 1}, "op"),
    ({"op": "put", "key": "a", "value": "x", "ts": 1, "i": "0"}, "i"),
])
def test_bad_record_names_index_and_field(raw: dict[str, Any], field: str) -> None:
    raw = {"i": 3, **raw}
    with pytest.raises(InputRecordError) as info:
        DEFINITION.parse_record(raw, 3)
    assert info.value.field == field
    assert info.value.index == 3
    assert f"record 3, field '{field}'" in str(info.value)


def test_record_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InputRecordError, match="record 0"):
        DEFINITION.parse_record(["put", "a"], 0)


def _scenario(tmp_path: Path, config: dict[str, Any], records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({
        "name": "bad", "operator": "versioned_table", "config": config,
        "input": [{"i": pos, **r} for pos, r in enumerate(records)],
        "expected": [{"put": "latest", "after_input": 0}], "notes": "bad input"}))
    return path


@pytest.mark.parametrize(("config", "records", "fragment"), [
    ({"history_retention_ms": 10}, [put("a", "x", 1), {"op": "put", "key": "a", "value": "y", "ts": "5"}],
     "record 1, field 'ts'"),
    ({"history_retention_ms": 10}, [{"op": "upsert", "key": "a", "value": "y", "ts": 1}],
     "record 0, field 'op'"),
    ({"history_retention_ms": 10, "retention": 3}, [put("a", "x", 1)], "config.retention: unknown key"),
])
def test_cli_exits_2_with_a_message_and_no_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any],
        records: list[dict[str, Any]], fragment: str) -> None:
    for args in ([], ["--check"]):
        code = main(["replay", str(_scenario(tmp_path, config, records)), *args])
        err = capsys.readouterr().err
        assert code == EXIT_INVALID
        assert fragment in err
        assert "Traceback" not in err


# -- property (e): VersionedStore.get equals a brute-force search ------------------------------


def _canon(key: Any) -> str:
    return json.dumps(key, sort_keys=True)


def brute_force(retention: int, ops: list[tuple[Any, ...]]) -> list[Any]:
    """Results of each op computed from the list of every non-expired put, nothing cleaned up."""
    accepted: list[tuple[str, int, Any]] = []  # (key, ts, value) in arrival order
    stream_time: int | None = None
    results: list[Any] = []
    for op in ops:
        bound = None if stream_time is None else stream_time - retention
        if op[0] == "put":
            _, key, value, ts = op
            mine = {t: v for k, t, v in accepted if k == _canon(key)}  # arrival order: ts replaces
            top = max(mine, default=None)
            previous = None if top is None or mine[top] is None else VersionedRecord(mine[top], top,
                                                                                      None)
            if bound is not None and ts < bound:
                results.append(PutResult("expired", previous))
                continue
            later = [t for t in mine if t > ts]
            results.append(PutResult("out_of_order", previous, min(later)) if later
                           else PutResult("latest", previous))
            accepted.append((_canon(key), ts, value))
            stream_time = ts if stream_time is None else max(stream_time, ts)
            continue
        _, key, as_of = op
        versions: dict[int, Any] = {}
        for k, t, v in accepted:  # arrival order: an equal ts replaces
            if k == _canon(key):
                versions[t] = v
        if not versions:
            results.append(None)
            continue
        latest = max(versions)
        chosen: int | None
        if as_of is None:
            chosen = latest
        elif bound is not None and as_of < bound:
            chosen = latest if latest <= as_of else None
        else:
            chosen = max((t for t in versions if t <= as_of), default=None)
        if chosen is None or versions[chosen] is None:
            results.append(None)
        else:
            nxt = [t for t in versions if t > chosen]
            results.append(VersionedRecord(versions[chosen], chosen, min(nxt) if nxt else None))
    return results


def store_results(store: VersionedStore, ops: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = []
    for op in ops:
        out.append(store.put(*op[1:]) if op[0] == "put" else store.get(*op[1:]))
    return out


# True, 1 and 1.0 are three keys (joins.core.keys); the brute force tells them apart by JSON text.
KEYS = st.sampled_from(["a", "b", True, 1, 1.0])
OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), KEYS, st.sampled_from(["x", "y", "", None]), st.integers(0, 30)),
    st.tuples(st.just("get"), KEYS, st.one_of(st.none(), st.integers(-2, 34))),
), max_size=40)


@given(retention=st.integers(0, 12), ops=OPS)
def test_property_store_equals_brute_force(retention: int, ops: list[tuple[Any, ...]]) -> None:
    assert store_results(VersionedStore(retention), ops) == brute_force(retention, ops)


class _LatestExpiresToo(VersionedStore):
    """Mutant: forgets that the latest version never expires."""

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        bound = self.expiry_bound
        if as_of is not None and bound is not None and as_of < bound:
            return None
        return super().get(key, as_of)


class _BoundExclusive(VersionedStore):
    """Mutant: refuses a put exactly at stream time minus history retention."""

    def put(self, key: Any, value: Any, ts: int) -> PutResult:
        if self.expiry_bound is not None and ts == self.expiry_bound:
            return PutResult("expired")
        return super().put(key, value, ts)


class _NoReplace(VersionedStore):
    """Mutant: an equal-ts put does not replace a tombstone (keeps the delete)."""

    def put(self, key: Any, value: Any, ts: int) -> PutResult:
        current = self.get(key, ts)
        times = self._versions.get(key_id(key), ([], []))[0]
        if current is None and times and times[-1] == ts and value is not None:
            return PutResult("latest")
        return super().put(key, value, ts)


@pytest.mark.parametrize("mutant", [_LatestExpiresToo, _BoundExclusive, _NoReplace])
def test_property_e_catches_mutants(mutant: Callable[[int], VersionedStore]) -> None:
    # The property is not a tautology: each plausible bug has a counterexample.
    retention, ops = find(
        st.tuples(st.integers(0, 12), OPS),
        lambda case: store_results(mutant(case[0]), case[1]) != brute_force(*case),
        settings=mutant_search(2000))
    assert store_results(mutant(retention), ops) != brute_force(retention, ops)
