"""The reference foreign-key join (seed 004, KIP-213; seed 000 for versioned sides).

Unit tests per protocol step and instruction, seed 004's stale-hash race driven through the
queues, input and config errors, and hypothesis properties: the final output table equals a
from-scratch foreign-key join, record at a time and under random (Kafka-legal) delivery orders.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

import joins.operators.fk_join.lhs as lhs_module
from joins.cli import EXIT_INVALID, EXIT_OK, main
from joins.core.keys import key_id
from joins.errors import ConfigError, InputRecordError
from joins.microbatch import run_reference
from joins.operators.fk_join import DEFINITION
from joins.operators.fk_join.lhs import InstructionTable, LeftChange, LeftSide, plan_subscriptions
from joins.operators.fk_join.protocol import (
    CombinedKey,
    Instruction,
    ResponseMessage,
    SubscriptionMessage,
    SubscriptionResponseWrapper,
    SubscriptionWrapper,
    value_hash,
)
from joins.operators.fk_join.reference import FkJoinProcessor
from joins.operators.fk_join.rhs import RightSide, SubscriptionEntry
from joins.operators.fk_join.spec import FkJoinRecord, FkJoinSpec, parse_fk_record
from joins.operators.registry import get_operator
from joins.spec import parse_spec
from tests.budget import mutant_search

SCENARIO_DIR = Path(__file__).parent.parent / "scenarios"
MY_SCENARIOS = sorted([*SCENARIO_DIR.glob("004_*.json"), *SCENARIO_DIR.glob("config_error_fk_*.json")])

DEL_NO = Instruction.DELETE_KEY_NO_PROPAGATE
DEL_PROP = Instruction.DELETE_KEY_AND_PROPAGATE
NULL_IF = Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE
ONLY_IF = Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE


# -- helpers -------------------------------------------------------------------------------------

def make_spec(join: str = "inner", *, foreign_key: str = "fk", versioned: bool = False,
              retention: int = 1000) -> FkJoinSpec:
    side: dict[str, Any] = {"versioned": versioned}
    if versioned:
        side["history_retention_ms"] = retention
    return parse_spec(FkJoinSpec, {"join": join, "foreign_key": foreign_key, "left": side,
                                   "right": side}, operator="fk_join")


class Feed:
    """Builds validated records with consecutive arrival indexes."""

    def __init__(self) -> None:
        self.i = 0

    def __call__(self, side: str, key: Any, value: Any, ts: int = 0) -> FkJoinRecord:
        record = parse_fk_record({"i": self.i, "side": side, "key": key, "value": value, "ts": ts},
                                 self.i)
        self.i += 1
        return record


def strip(items: Iterable[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(it["key"], it["value"]) for it in items]


def final_table(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Last value per key; a tombstone removes the key."""
    table: dict[str, Any] = {}
    for it in items:
        k = key_id(it["key"])
        if it["value"] is None:
            table.pop(k, None)
        else:
            table[k] = it["value"]
    return table


def oracle(join: str, left: dict[str, Any], right: dict[str, Any],
           foreign_key: str = "fk") -> dict[str, Any]:
    """A from-scratch foreign-key join of two final tables (canonical keys -> values)."""
    out: dict[str, Any] = {}
    for k, value in left.items():
        fk = value.get(foreign_key)
        match = None if fk is None else right.get(key_id(fk))
        if match is not None:
            out[k] = [value, match]
        elif join == "left":
            out[k] = [value, None]
    return out


def final_inputs(records: Sequence[FkJoinRecord]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Final left and right tables of unversioned inputs (latest by arrival)."""
    tables: dict[str, dict[str, Any]] = {"left": {}, "right": {}}
    for r in records:
        if r.value is None:
            tables[r.side].pop(key_id(r.key), None)
        else:
            tables[r.side][key_id(r.key)] = r.value
    return tables["left"], tables["right"]


# -- spec and records ----------------------------------------------------------------------------

def test_definition_is_registered() -> None:
    definition = get_operator("fk_join")
    assert definition is DEFINITION
    assert definition.compacts_output
    assert definition.spec_type is FkJoinSpec
    record = parse_fk_record({"i": 0, "side": "right", "key": 1, "value": "x", "ts": 0}, 0)
    assert definition.batch_phase(record) == 0


@pytest.mark.parametrize(("config", "fragment"), [
    ({"join": "outer", "foreign_key": "fk", "left": {"versioned": False},
      "right": {"versioned": False}}, "config.join"),
    ({"join": "inner", "left": {"versioned": False}, "right": {"versioned": False}},
     "config.foreign_key: required setting is missing"),
    ({"join": "inner", "foreign_key": "fk", "left": {"versioned": False},
      "right": {"versioned": False}, "grace_ms": 5}, "config.grace_ms: unknown key"),
    ({"join": "inner", "foreign_key": "a..b", "left": {"versioned": False},
      "right": {"versioned": False}}, "config.foreign_key"),
    ({"join": "inner", "foreign_key": "", "left": {"versioned": False},
      "right": {"versioned": False}}, "config.foreign_key"),
    ({"join": "inner", "foreign_key": "fk", "left": {"versioned": True},
      "right": {"versioned": False}}, "config.left.history_retention_ms: required"),
    ({"join": "inner", "foreign_key": "fk", "left": {"versioned": False},
      "right": {"versioned": False, "history_retention_ms": 5}},
     "config.right.history_retention_ms: only meaningful"),
    ({"join": "inner", "foreign_key": "fk", "left": {"versioned": "yes"},
      "right": {"versioned": False}}, "config.left.versioned"),
    ({"join": "inner", "foreign_key": "fk", "left": {"versioned": True, "history_retention_ms": -1},
      "right": {"versioned": False}}, "config.left.history_retention_ms"),
    ({"join": "inner", "foreign_key": "fk", "left": {"versioned": False}},
     "config.right: required setting is missing"),
    ({"join": "inner", "foreign_key": "fk", "left": {"versioned": False, "grace": 1},
      "right": {"versioned": False}}, "config.left.grace: unknown key"),
])
def test_bad_config_names_the_key(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec(FkJoinSpec, config, operator="fk_join")
    assert fragment in str(info.value)


@pytest.mark.parametrize(("raw", "field", "fragment"), [
    ({"i": 0, "side": "left", "key": "k", "value": {"fk": 1}}, "ts", "missing"),
    ({"i": 0, "side": "left", "key": "k", "value": {"fk": 1}, "ts": 1.5}, "ts", "integer"),
    ({"i": 0, "side": "left", "key": "k", "value": {"fk": 1}, "ts": "1"}, "ts", "integer"),
    ({"i": 0, "side": "left", "key": "k", "value": {"fk": 1}, "ts": True}, "ts", "integer"),
    ({"i": 0, "side": "left", "key": "k", "ts": 1}, "value", "missing"),
    ({"i": 0, "side": "middle", "key": "k", "value": 1, "ts": 1}, "side", "left"),
    ({"i": 0, "side": "left", "key": None, "value": {"fk": 1}, "ts": 1}, "key", "null"),
    ({"i": 0, "side": "left", "key": "k", "value": "not-an-object", "ts": 1}, "value", "object"),
    ({"i": 0, "side": "left", "key": "k", "value": [1, 2], "ts": 1}, "value", "object"),
    ({"i": 0, "side": "left", "key": "k", "value": {"fk": 1}, "ts": 1, "extra": 1}, "extra",
     "unknown"),
])
def test_bad_record_names_index_and_field(raw: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(InputRecordError) as info:
        parse_fk_record(raw, 0)
    assert info.value.field == field
    assert info.value.index == 0
    assert "record 0" in str(info.value) and fragment in str(info.value)


def test_right_value_may_be_any_json_and_empty_string_is_a_value() -> None:
    feed = Feed()
    p = FkJoinProcessor(make_spec("inner"))
    p.process(feed("right", 1, ""))
    assert strip(p.process(feed("left", "k", {"fk": 1}))) == [("k", [{"fk": 1}, ""])]


def test_missing_foreign_key_field_is_a_null_foreign_key() -> None:
    spec = make_spec("left", foreign_key="ref.id")
    assert spec.extract_foreign_key({"other": 1}) is None
    assert spec.extract_foreign_key({"ref": {}}) is None
    assert spec.extract_foreign_key({"ref": {"id": None}}) is None
    assert spec.extract_foreign_key({"ref": {"id": {"a": 1}}}) == {"a": 1}
    feed = Feed()
    p = FkJoinProcessor(spec)
    assert strip(p.process(feed("left", "k", {"other": 1}))) == [("k", [{"other": 1}, None])]


def test_foreign_key_path_through_a_non_object_is_an_input_error() -> None:
    feed = Feed()
    p = FkJoinProcessor(make_spec("inner", foreign_key="ref.id"))
    p.process(feed("left", "k", {"ref": {"id": 1}}))
    with pytest.raises(InputRecordError) as info:
        p.process(feed("left", "k", {"ref": 5}))
    assert info.value.index == 1 and info.value.field == "value.ref"
    assert "config.foreign_key is 'ref.id'" in str(info.value)
    # The malformed row left no trace: the previous value is still the current one.
    assert p.lhs.current_value("k") == {"ref": {"id": 1}}
    assert not p.subscription_queue


def test_list_foreign_key_is_an_input_error() -> None:
    p = FkJoinProcessor(make_spec("inner"))
    with pytest.raises(InputRecordError) as info:
        p.process(Feed()("left", "k", {"fk": [1]}))
    assert info.value.field == "value.fk"


# -- LHS: which instructions a left update sends -------------------------------------------------

def change(old: Any = "absent", new: Any = "absent") -> LeftChange:
    """old/new: "absent" (no row), None (row with a null FK) or the FK."""
    return LeftChange(old_present=old != "absent", old_fk=None if old == "absent" else old,
                      new_present=new != "absent", new_fk=None if new == "absent" else new)


@pytest.mark.parametrize(("c", "inner", "left"), [
    # insert
    (change(new=1), [(1, ONLY_IF)], [(1, NULL_IF)]),
    # FK unchanged
    (change(1, 1), [(1, ONLY_IF)], [(1, NULL_IF)]),
    # FK changed
    (change(1, 2), [(1, DEL_NO), (2, NULL_IF)], [(1, DEL_NO), (2, NULL_IF)]),
    # delete
    (change(old=1), [(1, DEL_PROP)], [(1, DEL_NO), (None, NULL_IF)]),
    # delete of an absent row
    (change(), [], []),
    # FK becomes null
    (change(1, None), [(1, DEL_PROP)], [(1, DEL_NO), (None, NULL_IF)]),
    # null FK stays null / null FK row inserted / deleted
    (change(None, None), [], [(None, NULL_IF)]),
    (change(new=None), [], [(None, NULL_IF)]),
    (change(old=None), [], [(None, NULL_IF)]),
    # null FK becomes a real one: no previous result possible in an inner join
    (change(None, 1), [(1, ONLY_IF)], [(1, NULL_IF)]),
])
def test_instruction_table(c: LeftChange, inner: list[Any], left: list[Any]) -> None:
    assert plan_subscriptions("inner", c) == inner
    assert plan_subscriptions("left", c) == left
    # respond_always: the inner join uses the left join's table.
    assert plan_subscriptions("inner", c, "respond_always") == left


def test_left_update_sends_subscriptions_with_the_new_value_hash() -> None:
    feed = Feed()
    lhs = LeftSide(make_spec("inner"))
    [sub] = lhs.on_update(feed("left", "k", {"fk": 1}, ts=4))
    assert sub == SubscriptionMessage(CombinedKey(1, "k"),
                                      SubscriptionWrapper(value_hash({"fk": 1}), ONLY_IF), 4)
    unsub, sub2 = lhs.on_update(feed("left", "k", {"fk": 2}, ts=5))
    assert unsub.key == CombinedKey(1, "k") and unsub.value.instruction is DEL_NO
    assert sub2.key == CombinedKey(2, "k") and sub2.value.instruction is NULL_IF
    # Both carry the hash of the NEW value: the old FK's RHS only deletes, never answers.
    assert unsub.value.hash == sub2.value.hash == value_hash({"fk": 2})
    [delete] = lhs.on_update(feed("left", "k", None, ts=6))
    assert delete.key == CombinedKey(2, "k") and delete.value == SubscriptionWrapper(None, DEL_PROP)


def test_value_hash_depends_on_the_whole_value_not_on_key_order() -> None:
    assert value_hash({"fk": 1, "n": 1}) == value_hash({"n": 1, "fk": 1})
    assert value_hash({"fk": 1, "n": 1}) != value_hash({"fk": 1, "n": 2})
    assert value_hash(None) is None


# -- RHS: subscriptions and fan-out --------------------------------------------------------------

def sub(fk: Any, pk: Any, instruction: Instruction, h: str | None = "h", ts: int = 1) -> SubscriptionMessage:
    return SubscriptionMessage(CombinedKey(fk, pk), SubscriptionWrapper(h, instruction), ts)


def rhs_with(right: dict[Any, tuple[Any, int]]) -> RightSide:
    feed = Feed()
    rhs = RightSide(make_spec("inner"))
    for key, (value, ts) in right.items():
        rhs.on_update(feed("right", key, value, ts))
    return rhs


@pytest.mark.parametrize(("instruction", "stored", "with_row", "without_row"), [
    (NULL_IF, True, ("r", False), (None, True)),
    (ONLY_IF, True, ("r", False), "no answer"),
    (DEL_NO, False, "no answer", "no answer"),
    (DEL_PROP, False, (None, True), (None, True)),
])
def test_subscription_instruction(instruction: Instruction, stored: bool, with_row: Any,
                                  without_row: Any) -> None:
    for right, expected in (({1: ("r", 7)}, with_row), ({}, without_row)):
        rhs = rhs_with(right)
        rhs.subscriptions.put(CombinedKey(1, "k"), SubscriptionEntry("old", 0))
        responses = rhs.on_subscription(sub(1, "k", instruction, "h", ts=3))
        entry = rhs.subscriptions.get(CombinedKey(1, "k"))
        assert (entry == SubscriptionEntry("h", 3)) if stored else entry is None
        if expected == "no answer":
            assert responses == []
        else:
            value, propagate = expected
            # The response carries the larger timestamp of the subscription (3) and the row (7).
            ts = 7 if right else 3
            assert responses == [ResponseMessage(
                "k", SubscriptionResponseWrapper("h", value, propagate), ts, key_id(1))]


def test_null_foreign_key_subscription_is_answered_with_null_and_never_stored() -> None:
    rhs = rhs_with({})
    assert rhs.on_subscription(sub(None, "k", NULL_IF, "h", ts=2)) == [
        ResponseMessage("k", SubscriptionResponseWrapper("h", None, True), 2, "null")]
    assert len(rhs.subscriptions) == 0
    assert rhs.on_subscription(sub(None, "k", ONLY_IF)) == []
    assert rhs.metrics["null_foreign_key_subscription_dropped"] == 1


def test_right_update_fans_out_to_every_subscriber_with_its_own_hash() -> None:
    feed = Feed()
    rhs = RightSide(make_spec("inner"))
    rhs.on_subscription(sub(1, "b", NULL_IF, "hb", ts=4))
    rhs.on_subscription(sub(1, "a", NULL_IF, "ha", ts=9))
    rhs.on_subscription(sub(2, "c", NULL_IF, "hc"))
    fan = rhs.on_update(feed("right", 1, "r", ts=6))
    # Each response carries the right update's ts (6), not the subscription's (Kafka Streams).
    assert fan == [
        ResponseMessage("a", SubscriptionResponseWrapper("ha", "r", False), 6, key_id(1)),
        ResponseMessage("b", SubscriptionResponseWrapper("hb", "r", False), 6, key_id(1)),
    ]
    # A right tombstone reaches the same subscribers as a null that must propagate.
    tomb = rhs.on_update(feed("right", 1, None, ts=10))
    assert [(m.primary_key, m.value.foreign_value, m.value.propagate_if_null) for m in tomb] == [
        ("a", None, True), ("b", None, True)]
    # Unsubscribed keys are not reached.
    rhs.on_subscription(sub(1, "a", DEL_NO, "ha"))
    assert [m.primary_key for m in rhs.on_update(feed("right", 1, "s", ts=11))] == ["b"]
    assert rhs.on_update(feed("right", 3, "nobody", ts=12)) == []


def test_prefix_scan_is_by_foreign_key_identity_not_by_text_prefix() -> None:
    rhs = RightSide(make_spec("inner"))
    rhs.on_subscription(sub(1, "a", NULL_IF))
    rhs.on_subscription(sub(10, "b", NULL_IF))
    rhs.on_subscription(sub("1", "c", NULL_IF))
    assert [ck.primary_key for ck, _ in rhs.subscriptions.prefix_scan(1)] == ["a"]
    assert [ck.primary_key for ck, _ in rhs.subscriptions.prefix_scan("1")] == ["c"]


def test_foreign_keys_one_and_one_point_zero_are_two_keys() -> None:
    """The foreign key 1.0 does not reference the right key 1 (joins.core.keys), and changing a
    left row's FK from 1 to 1.0 is a foreign-key change."""
    feed = Feed()
    p = FkJoinProcessor(make_spec("left"))
    p.process(feed("right", 1, "r-int", 1))
    assert p.process(feed("left", "k", {"fk": 1.0}, 2)) == [
        {"key": "k", "value": [{"fk": 1.0}, None], "ts": 2}]
    assert p.process(feed("left", "k", {"fk": 1}, 3)) == [
        {"key": "k", "value": [{"fk": 1}, "r-int"], "ts": 3}]
    assert p.process(feed("right", 1.0, "r-float", 4)) == []   # nobody references 1.0 now


# -- LHS: the response join ----------------------------------------------------------------------

def response(pk: Any, h: str | None, right: Any, propagate: bool, ts: int = 5) -> ResponseMessage:
    return ResponseMessage(pk, SubscriptionResponseWrapper(h, right, propagate), ts, "p")


@pytest.mark.parametrize("join", ["inner", "left"])
def test_response_join_rules(join: str) -> None:
    lhs = LeftSide(make_spec(join))
    v = {"fk": 1}
    lhs.on_update(Feed()("left", "k", v))
    h = value_hash(v)
    # step 6a: stale hash -> discarded and counted
    assert lhs.on_response(response("k", value_hash({"fk": 0}), "r", False)) == []
    assert lhs.metrics["stale_response_discarded"] == 1
    # step 8: join with the current left value
    assert lhs.on_response(response("k", h, "r", False)) == [{"key": "k", "value": [v, "r"], "ts": 5}]
    # step 7a: null that must propagate -> tombstone (inner) / [left, null] (left)
    assert lhs.on_response(response("k", h, None, True)) == [
        {"key": "k", "value": None if join == "inner" else [v, None], "ts": 5}]
    # a null that need not propagate emits nothing (counted)
    assert lhs.on_response(response("k", h, None, False)) == []
    assert lhs.metrics["null_response_not_propagated"] == 1
    # the answer to a delete: the key has no left row, the hash of nothing is None -> tombstone
    assert lhs.on_response(response("gone", None, None, True)) == [
        {"key": "gone", "value": None, "ts": 5}]


# -- seed 004's stale-hash race, driven through the queues -----------------------------------------

@pytest.mark.parametrize("verify_hash", [True, False])
def test_seed_004_stale_hash_steps_1_to_8(verify_hash: bool) -> None:
    feed = Feed()
    p = FkJoinProcessor(make_spec("inner"), verify_hash=verify_hash)
    v1, v2 = {"fk": "Y", "n": 1}, {"fk": "Y", "n": 2}
    emitted: list[dict[str, Any]] = []
    # 1- RHS is updated to Y|bar (nobody subscribes yet)
    assert p.process_right(feed("right", "Y", "bar", 1)) == []
    # 2- LHS is updated to A|Y,1 -> sends Y|A+ subscription
    [s1] = p.process_left(feed("left", "A", v1, 2))
    assert s1.key == CombinedKey("Y", "A") and s1.value.hash == value_hash(v1)
    # 3- LHS is updated to A|Y,2 -> sends Y|A+ again with the new hash. (The seed also lists a
    #    Y|A- unsubscribe; current Kafka sends none when the FK is unchanged: a re-subscription
    #    under the same CombinedKey overwrites the old one.)
    [s2] = p.process_left(feed("left", "A", v2, 3))
    assert s2.key == CombinedKey("Y", "A") and s2.value.hash == value_hash(v2)
    assert list(p.subscription_queue) == [s1, s2]
    # 4- RHS processes the first Y|A+ -> sends A|Y,bar back (with the hash of A|Y,1)
    [r1] = p.deliver_to_rhs()
    assert r1.value == SubscriptionResponseWrapper(value_hash(v1), "bar", False)
    # 5- LHS processes it: A's current value is A|Y,2, so the hash differs -> discarded
    emitted += p.deliver_to_lhs()
    # 6- (the seed's unsubscribe: nothing to do here, see step 3)
    # 7- RHS processes the second Y|A+ -> sends A|Y,bar back (with the hash of A|Y,2)
    [r2] = p.deliver_to_rhs()
    assert r2.value.original_value_hash == value_hash(v2)
    # 8- LHS processes it and produces A|Y,2,bar
    emitted += p.deliver_to_lhs()
    assert not p.subscription_queue and not p.response_queue
    if verify_hash:
        assert strip(emitted) == [("A", [v2, "bar"])]
        assert p.metrics["stale_response_discarded"] == 1
    else:
        # Without the check the seed's bug appears: the answer meant for A|Y,1 is joined with
        # A|Y,2, and the result is emitted twice.
        assert strip(emitted) == [("A", [v2, "bar"]), ("A", [v2, "bar"])]


def test_stale_answer_from_the_old_foreign_key_is_discarded() -> None:
    """FK 1 -> 2 quickly; FK 1's answer arrives after the change and must not resurrect (k, r1)."""
    feed = Feed()
    p = FkJoinProcessor(make_spec("left"))
    p.process(feed("right", 1, "r1"))
    p.process_left(feed("left", "k", {"fk": 1}))
    p.process_left(feed("left", "k", {"fk": 2}))
    # FK 2's partition answers first; FK 1's (a different partition) lags behind.
    [to_fk2] = [pos for pos, m in enumerate(p.subscription_queue) if m.partition == key_id(2)]
    p.deliver_to_rhs(to_fk2)
    out = p.drain()
    assert strip(out) == [("k", [{"fk": 2}, None])]
    assert p.metrics["stale_response_discarded"] == 1


# -- Kafka's inner-join instruction table under delayed responses ----------------------------------

@pytest.mark.parametrize(("table", "converges"), [("kafka", False), ("respond_always", True)])
def test_delete_then_insert_race(table: InstructionTable, converges: bool) -> None:
    """Known limitation of Kafka's inner-join table, pinned: a delete's null answer delayed past
    a re-insert under another FK is stale (hash mismatch) and dropped, and the insert asks for an
    answer only on a match, so nothing deletes the old result. "respond_always" converges."""
    feed = Feed()
    p = FkJoinProcessor(make_spec("inner"), instruction_table=table)
    out = p.process(feed("right", 1, "r1"))
    out += p.process(feed("left", "k", {"fk": 1}))
    assert strip(out) == [("k", [{"fk": 1}, "r1"])]
    p.process_left(feed("left", "k", None))
    p.deliver_to_rhs()  # the delete reaches FK 1's RHS, its null answer is held back...
    out += p.process(feed("left", "k", {"fk": 2}))  # ...while k is re-inserted under FK 2
    out += p.drain()
    expected = oracle("inner", {key_id("k"): {"fk": 2}}, {key_id(1): "r1"})
    assert (final_table(out) == expected) is converges
    assert expected == {}


# -- versioned sides (seed 000) ----------------------------------------------------------------------

def test_out_of_order_left_record_sends_no_subscription() -> None:
    feed = Feed()
    p = FkJoinProcessor(make_spec("inner", versioned=True, retention=100))
    p.process(feed("right", 1, "r1", 10))
    p.process(feed("right", 2, "r2", 10))
    assert strip(p.process(feed("left", "k", {"fk": 1}, 20))) == [("k", [{"fk": 1}, "r1"])]
    assert p.process_left(feed("left", "k", {"fk": 2}, 15)) == []
    assert p.metrics["out_of_order_ignored"] == 1 and p.lhs.metrics["out_of_order_ignored"] == 1
    # Still stored as history in the versioned left table; the latest is unchanged.
    assert p.lhs.table.get("k", 15).value == {"fk": 2}
    assert p.lhs.current_value("k") == {"fk": 1}
    # Equal timestamp is not out of order: it replaces the latest and subscribes.
    assert strip(p.process(feed("left", "k", {"fk": 2}, 20))) == [("k", [{"fk": 2}, "r2"])]


def test_out_of_order_right_record_does_not_fan_out() -> None:
    feed = Feed()
    p = FkJoinProcessor(make_spec("left", versioned=True, retention=100))
    p.process(feed("right", 1, "r1", 10))
    p.process(feed("left", "k", {"fk": 1}, 20))
    assert p.process_right(feed("right", 1, "old", 5)) == []
    assert p.rhs.metrics["out_of_order_ignored"] == 1
    # Lookups still see the latest version.
    assert strip(p.process(feed("left", "m", {"fk": 1}, 21))) == [("m", [{"fk": 1}, "r1"])]
    out = p.process(feed("right", 1, None, 30))  # an in-order tombstone fans out
    assert strip(out) == [("k", [{"fk": 1}, None]), ("m", [{"fk": 1}, None])]


def test_expired_records_emit_nothing_and_are_counted() -> None:
    feed = Feed()
    p = FkJoinProcessor(make_spec("left", versioned=True, retention=10))
    p.process(feed("right", 1, "r1", 50))
    assert p.process(feed("right", 2, "r2", 1)) == []
    p.process(feed("left", "k", {"fk": 1}, 50))
    assert p.process(feed("left", "new-key", {"fk": 1}, 1)) == []
    assert p.metrics["expired"] == 2
    assert p.lhs.current_value("new-key") is None


def test_unversioned_sides_take_late_timestamps_as_updates() -> None:
    feed = Feed()
    p = FkJoinProcessor(make_spec("inner"))
    p.process(feed("right", 1, "r1", 10))
    p.process(feed("right", 2, "r2", 10))
    p.process(feed("left", "k", {"fk": 1}, 20))
    assert strip(p.process(feed("left", "k", {"fk": 2}, 5))) == [("k", [{"fk": 2}, "r2"])]
    assert p.metrics["out_of_order_ignored"] == 0


def test_result_timestamp_follows_kafka() -> None:
    """A left update's result: max(left ts, ts of the current right value), the left ts alone
    when there is none. A right update's fan-out: the right update's own ts, even when it is
    older than the subscriber (m@40 joined with r2@35 is emitted at 35), as Kafka Streams does."""
    feed = Feed()
    p = FkJoinProcessor(make_spec("left"))
    p.process(feed("right", 1, "r1", 30))
    assert p.process(feed("left", "k", {"fk": 1}, 20))[0]["ts"] == 30
    assert p.process(feed("left", "m", {"fk": 1}, 40))[0]["ts"] == 40
    fan = p.process(feed("right", 1, "r2", 35))
    assert [(it["key"], it["ts"]) for it in fan] == [("k", 35), ("m", 35)]
    p.process(feed("right", 1, None, 36))
    assert p.process(feed("left", "k", {"fk": 1, "v": 2}, 21)) == [
        {"key": "k", "value": [{"fk": 1, "v": 2}, None], "ts": 21}]


# -- CLI -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", MY_SCENARIOS, ids=[p.stem for p in MY_SCENARIOS])
def test_scenario_replay_check(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(path), "--check"]) == EXIT_OK, capsys.readouterr().err


def test_expected_scenarios_exist() -> None:
    names = {p.stem for p in MY_SCENARIOS}
    assert {"004_lhs_steps_inner", "004_lhs_steps_left", "004_jan_one_to_many_inner",
            "004_stale_hash_record_at_a_time", "004_versioned_out_of_order",
            "config_error_fk_outer_join", "config_error_fk_missing_foreign_key",
            "config_error_fk_unknown_key"} <= names


def _scenario(tmp_path: Path, config: dict[str, Any], inputs: list[Any]) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"name": "s", "operator": "fk_join", "config": config,
                                "input": inputs, "expected": [], "notes": "test"}))
    return str(path)


GOOD = {"join": "inner", "foreign_key": "fk", "left": {"versioned": False},
        "right": {"versioned": False}}


@pytest.mark.parametrize(("config", "inputs", "fragments"), [
    ({**GOOD, "join": "outer"}, [], ["config.join"]),
    ({**GOOD, "colour": "red"}, [], ["config.colour", "unknown key"]),
    (GOOD, [{"i": 0, "side": "left", "key": "k", "value": {"fk": 1}}], ["record 0", "field 'ts'"]),
    (GOOD, [{"i": 0, "side": "left", "key": "k", "value": 3, "ts": 1}], ["record 0", "field 'value'"]),
    ({**GOOD, "foreign_key": "a.b"},
     [{"i": 0, "side": "right", "key": 1, "value": "x", "ts": 1},
      {"i": 1, "side": "left", "key": "k", "value": {"a": "flat"}, "ts": 1}],
     ["record 1", "field 'value.a'"]),
])
def test_cli_invalid_scenario_exits_2_with_a_message(tmp_path: Path, config: dict[str, Any],
                                                     inputs: list[Any], fragments: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", _scenario(tmp_path, config, inputs)])
    err = capsys.readouterr().err
    assert code == EXIT_INVALID
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


# -- hypothesis properties ---------------------------------------------------------------------------

LEFT_KEYS = ["a", "b", "c"]
RIGHT_KEYS = [1, 2, 3]


@st.composite
def left_values(draw: st.DrawFn) -> Any:
    fk = draw(st.sampled_from([1, 2, 3, None, "absent"]))
    n = draw(st.integers(0, 2))
    if fk == "absent":
        return {"n": n}
    return {"fk": fk, "n": n}


update = st.one_of(
    st.tuples(st.just("left"), st.sampled_from(LEFT_KEYS),
              st.one_of(st.none(), left_values()), st.integers(0, 30)),
    st.tuples(st.just("right"), st.sampled_from(RIGHT_KEYS),
              st.sampled_from([None, "x", "y"]), st.integers(0, 30)),
)
updates = st.lists(update, max_size=25)


def to_records(ops: Sequence[tuple[str, Any, Any, int]]) -> list[FkJoinRecord]:
    return [parse_fk_record({"i": i, "side": s, "key": k, "value": v, "ts": ts}, i)
            for i, (s, k, v, ts) in enumerate(ops)]


def record_at_a_time(join: str, records: Sequence[FkJoinRecord]) -> list[dict[str, Any]]:
    p = FkJoinProcessor(make_spec(join))
    return [item for r in records for item in p.process(r)]


@pytest.mark.parametrize("join", ["inner", "left"])
@given(ops=updates, batch_size=st.integers(2, 6))
def test_final_table_equals_from_scratch_join(join: str, ops: list[Any], batch_size: int) -> None:
    records = to_records(ops)
    expected = oracle(join, *final_inputs(records))
    assert final_table(record_at_a_time(join, records)) == expected
    # The micro-batch rule (compacted per batch) keeps the same final table.
    batched = run_reference(DEFINITION, make_spec(join), records, batch_size)
    assert final_table(batched) == expected


@given(ops=updates)
def test_versioned_final_table_joins_the_latest_by_timestamp(ops: list[Any]) -> None:
    """Versioned sides, retention large enough that nothing expires: the final output is the
    join of the latest-by-timestamp rows (out-of-order updates are ignored, seed 000)."""
    records = to_records(ops)
    p = FkJoinProcessor(make_spec("left", versioned=True, retention=10_000))
    items = [item for r in records for item in p.process(r)]
    latest: dict[str, dict[str, tuple[int, Any]]] = {"left": {}, "right": {}}
    for r in records:
        k = key_id(r.key)
        if k not in latest[r.side] or r.ts >= latest[r.side][k][0]:
            latest[r.side][k] = (r.ts, r.value)
    left = {k: v for k, (_, v) in latest["left"].items() if v is not None}
    right = {k: v for k, (_, v) in latest["right"].items() if v is not None}
    assert final_table(items) == oracle("left", left, right)


def _partition_heads(queue: Sequence[Any], partition_of: Any) -> list[int]:
    """Positions of the first pending message of each (partition, primary key) stream: Kafka
    keeps order within a partition, and records of different producers (primary keys on other
    LHS partitions) may interleave."""
    seen: set[tuple[str, str]] = set()
    heads = []
    for pos, message in enumerate(queue):
        stream = partition_of(message)
        if stream not in seen:
            seen.add(stream)
            heads.append(pos)
    return heads


def run_interleaved(join: str, records: Sequence[FkJoinRecord], rng: random.Random, *,
                    table: InstructionTable = "kafka", verify_hash: bool = True
                    ) -> list[dict[str, Any]]:
    """Inputs are applied in arrival order, but every message delivery may be delayed: at each
    step `rng` picks one of the legal next steps (the next input, or the head of any subscription
    or response stream), until all inputs are applied and both queues are empty."""
    p = FkJoinProcessor(make_spec(join), instruction_table=table, verify_hash=verify_hash)
    pending = list(records)
    out: list[dict[str, Any]] = []
    while pending or p.subscription_queue or p.response_queue:
        choices: list[tuple[str, int]] = [("input", 0)] if pending else []
        choices += [("rhs", pos) for pos in _partition_heads(
            p.subscription_queue, lambda m: (m.partition, key_id(m.key.primary_key)))]
        choices += [("lhs", pos) for pos in _partition_heads(
            p.response_queue, lambda m: (m.source_partition, key_id(m.primary_key)))]
        kind, pos = choices[rng.randrange(len(choices))]
        if kind == "input":
            record = pending.pop(0)
            if record.side == "left":
                p.process_left(record)
            else:
                p.process_right(record)
        elif kind == "rhs":
            p.deliver_to_rhs(pos)
        else:
            out += p.deliver_to_lhs(pos)
    return out


# A hypothesis-seeded PRNG: delivery orders spread evenly over the legal choices.
schedules = st.randoms(use_true_random=False)


@pytest.mark.parametrize(("join", "table"), [("left", "kafka"), ("inner", "respond_always")])
@given(ops=updates, schedule=schedules)
def test_interleaved_deliveries_converge(join: str, table: InstructionTable, ops: list[Any],
                                         schedule: random.Random) -> None:
    records = to_records(ops)
    out = run_interleaved(join, records, schedule, table=table)
    assert final_table(out) == oracle(join, *final_inputs(records))


def _finds_counterexample(strategy: st.SearchStrategy[Any], condition: Any) -> bool:
    try:
        find(strategy, condition, settings=mutant_search(3000))
    except NoSuchExample:
        return False
    return True


def test_interleaving_property_fails_without_the_hash_check() -> None:
    """The convergence property can fail: with the hash check off, hypothesis finds a delivery
    order whose final table is wrong."""
    def diverges(example: tuple[list[Any], random.Random]) -> bool:
        ops, schedule = example
        records = to_records(ops)
        out = run_interleaved("left", records, schedule, verify_hash=False)
        return final_table(out) != oracle("left", *final_inputs(records))
    assert _finds_counterexample(st.tuples(updates, schedules), diverges)


@pytest.mark.slow  # about 10 s: the race needs a rare delivery order to show
def test_interleaving_property_fails_for_kafkas_inner_table() -> None:
    """Why the inner join's convergence property runs with "respond_always": under Kafka's
    table some delivery order leaves a stale inner-join result (test_delete_then_insert_race)."""
    def diverges(example: tuple[list[Any], random.Random]) -> bool:
        ops, schedule = example
        records = to_records(ops)
        out = run_interleaved("inner", records, schedule, table="kafka")
        return final_table(out) != oracle("inner", *final_inputs(records))
    assert _finds_counterexample(st.tuples(updates, schedules), diverges)


def test_record_at_a_time_property_catches_a_wrong_instruction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The record-at-a-time property can fail: an inner join that never asks for a null answer
    on an FK change (PROPAGATE_ONLY instead of PROPAGATE_NULL) leaves stale results."""
    real = lhs_module.plan_subscriptions

    def broken(join: Any, c: LeftChange, table: InstructionTable = "kafka") -> list[Any]:
        return [(fk, ONLY_IF if i is NULL_IF else i) for fk, i in real(join, c, table)]

    monkeypatch.setattr(lhs_module, "plan_subscriptions", broken)

    def diverges(ops: list[Any]) -> bool:
        records = to_records(ops)
        return final_table(record_at_a_time("inner", records)) != oracle(
            "inner", *final_inputs(records))
    assert _finds_counterexample(updates, diverges)
