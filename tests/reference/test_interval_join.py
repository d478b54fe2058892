"""The reference interval join (seed 003): each algorithm step, the seed's examples, snapshots,
bad input, and property tests against a nested-loop join."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.cli import EXIT_INVALID, EXIT_OK, main
from joins.errors import ConfigError, InputRecordError, StateLimitError
from joins.operators.interval_join import (
    IntervalJoinProcessor,
    IntervalJoinSpec,
    parse_interval_join_record,
    restore,
)
from joins.operators.interval_join.reference import WatermarkPolicy
from joins.spec import parse_spec
from joins.sql import ColumnRef
from tests.budget import examples

Row = dict[str, Any]
Op = tuple[str, str, Any]  # ("row", side, row) | ("wm", side, (column, ts))


def spec(condition: str, join: str = "inner", left: Sequence[str] = ("id", "time"),
         right: Sequence[str] = ("id", "time"), **extra: Any) -> IntervalJoinSpec:
    config = {"join": join, "condition": condition, "left_columns": list(left),
              "right_columns": list(right), **extra}
    return parse_spec(IntervalJoinSpec, config, operator="interval_join")


def L(row: Row) -> Op:
    return ("row", "left", row)


def R(row: Row) -> Op:
    return ("row", "right", row)


def WL(column: str, ts: int) -> Op:
    return ("wm", "left", (column, ts))


def WR(column: str, ts: int) -> Op:
    return ("wm", "right", (column, ts))


def record(i: int, op: Op) -> Any:
    kind, side, payload = op
    if kind == "row":
        return parse_interval_join_record({"i": i, "side": side, "row": payload}, i)
    column, ts = payload
    return parse_interval_join_record({"i": i, "side": side, "watermark": {column: ts}}, i)


def run(processor: IntervalJoinProcessor, ops: Iterable[Op], start: int = 0) -> list[dict[str, Any]]:
    """Items with after_input, as the replay command shows them."""
    out: list[dict[str, Any]] = []
    for i, op in enumerate(ops, start):
        out.extend({**item, "after_input": i} for item in processor.process(record(i, op)))
    return out


def joined(left: Row | None, right: Row | None, after: int | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"row": {"l": left, "r": right}}
    return item if after is None else {**item, "after_input": after}


def wm(column: str, ts: int, after: int) -> dict[str, Any]:
    return {"watermark": {column: ts}, "after_input": after}


def rows_only(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if "row" in i]


# -- seed 003's walk-through (join2 with watermark keys 0, 1, 2) --------------------------------

JOIN2 = dict(condition="r.time BETWEEN d.time - 1 AND d.time + 4", left=("o.time", "d.time"),
             right=("r.time",))
L1, L2, R1 = {"o.time": 102, "d.time": 101}, {"o.time": 102, "d.time": 103}, {"r.time": 100}
WALK = [L(L1), L(L2), WL("o.time", 103), R(R1), WL("d.time", 102), WR("r.time", 110)]


def test_walkthrough_verbatim_with_the_seeds_min_buffer_formula() -> None:
    """Every step of the seed's walk-through: buffers, wmState and the emitted items."""
    p = IntervalJoinProcessor(spec(**JOIN2), output_watermarks="min_buffer")
    d, r = ColumnRef("left", "d.time"), ColumnRef("right", "r.time")
    assert p.state.wm_state == {d: {}, r: {}}  # initial: 0:{}, 1:{2:-inf}, 2:{1:-inf}
    assert run(p, WALK[:2]) == []
    assert [e.row for e in p.state.buffers["left"]] == [L1, L2]
    assert run(p, [WALK[2]], 2) == [wm("o.time", 102, 2)]  # can't emit 103: l rows would be late
    assert p.state.wm_state == {d: {}, r: {}}  # wm0 doesn't affect the wmState
    assert run(p, [WALK[3]], 3) == [joined(L1, R1, 3)]
    assert [e.row for e in p.state.buffers["right"]] == [R1]
    assert run(p, [WALK[4]], 4) == [wm("d.time", 101, 4)]
    assert p.state.wm_state == {d: {}, r: {d: 101}}
    assert p.state.buffers["right"] == []
    assert run(p, [WALK[5]], 5) == [wm("o.time", 103, 5), wm("d.time", 102, 5),
                                    wm("r.time", 110, 5)]
    assert p.state.wm_state == {d: {r: 106}, r: {d: 101}}
    assert p.state.buffers == {"left": [], "right": []}


def test_walkthrough_with_the_fault_tolerant_formula() -> None:
    """Bounded columns (d.time, r.time) use min(lastReceived, wmState); o.time has no bound, so
    it uses the minimum buffered o.time, as in the seed's walk-through (wm0(102), then wm0(103)
    once the buffers are empty)."""
    p = IntervalJoinProcessor(spec(**JOIN2))
    assert run(p, WALK) == [wm("o.time", 102, 2), joined(L1, R1, 3), wm("o.time", 103, 5),
                            wm("d.time", 102, 5), wm("r.time", 101, 5)]


def test_walkthrough_rule_1_nothing_removed_could_still_join() -> None:
    p = IntervalJoinProcessor(spec(**JOIN2))
    run(p, WALK)
    # Non-late rows arriving now join nothing removed: the buffers are empty and they stay
    # unbuffered or buffered without a match.
    assert run(p, [L({"o.time": 103, "d.time": 102}), R({"r.time": 110})], 6) == []


# -- edge cases --------------------------------------------------------------------------------

EQ = spec("l.time = r.time")


def test_edge_case_example_1_out_of_bounds_row_joins_but_is_not_buffered() -> None:
    p = IntervalJoinProcessor(EQ)
    l1, r1, r2 = {"id": "l1", "time": 0}, {"id": "r1", "time": 0}, {"id": "r2", "time": 0}
    assert rows_only(run(p, [L(l1), R(r1)])) == [joined(l1, r1, 1)]
    assert all(not e.unused for side in ("left", "right") for e in p.state.buffers[side])
    run(p, [WL("time", 1)], 2)
    assert p.state.buffers["right"] == []
    assert run(p, [R(r2)], 3) == [joined(l1, r2, 3)]
    assert p.state.buffers["right"] == []
    assert p.metrics["rows_out_of_bounds"] == 1


@pytest.mark.parametrize(("policy", "watermarks"), [
    ("min_buffer", [wm("l.time", 0, 1)]),  # the seed's `out: wm(l.time=0)`
    ("wm_state", []),  # wmState[l.time] is -inf until a right watermark arrives
])
def test_edge_case_example_2(policy: WatermarkPolicy, watermarks: list[dict[str, Any]]) -> None:
    p = IntervalJoinProcessor(EQ, output_watermarks=policy)
    l1, r1 = {"id": "l1", "time": 0}, {"id": "r1", "time": 0}
    assert run(p, [L(l1), WL("time", 1), R(r1)]) == [*watermarks, joined(l1, r1, 2)]
    assert p.state.buffers["right"] == []


def test_a_received_watermark_can_emit_several_watermarks() -> None:
    p = IntervalJoinProcessor(spec("l.time BETWEEN r.time - 1 AND r.time + 1"))
    assert run(p, [WL("time", 10)]) == []
    assert run(p, [WR("time", 20)], 1) == [wm("l.time", 10, 1), wm("r.time", 9, 1)]


# -- fault tolerance: seed 003's restart example ---------------------------------------------------

RESTART_SPEC = spec("l.time = r.time", join="left")
RESTART = [L({"id": "l1", "time": 10}), R({"id": "r1", "time": 10}), WL("time", 15),
           L({"id": "l2", "time": 10}), WR("time", 20), WL("time", 20)]


def test_restart_example_snapshot_and_restore_in_the_middle() -> None:
    uninterrupted = IntervalJoinProcessor(RESTART_SPEC)
    expected = run(uninterrupted, RESTART)

    before = IntervalJoinProcessor(RESTART_SPEC)
    out = run(before, RESTART[:3])
    snapshot = json.loads(json.dumps(before.snapshot()))  # plain JSON, as saved
    after = restore(snapshot)
    out += run(after, RESTART[3:], 3)

    assert out == expected
    assert rows_only(out) == [joined({"id": "l1", "time": 10}, {"id": "r1", "time": 10}, 1)]
    assert after.metrics == uninterrupted.metrics
    assert after.metrics["late_rows_dropped"] == 1


def test_restart_without_the_saved_watermarks_would_show_l2_unjoined() -> None:
    """Why the snapshot carries the last received watermarks: without them l2 is not late after
    the restart, r1 is gone, and the user sees l2 null-padded next to joined(l1, r1)."""
    before = IntervalJoinProcessor(RESTART_SPEC)
    run(before, RESTART[:3])
    snapshot = before.snapshot()
    snapshot["last_received"] = {}
    broken = run(IntervalJoinProcessor.restore(snapshot), RESTART[3:], 3)
    assert joined({"id": "l2", "time": 10}, None, 4) in broken


def test_restart_without_the_unused_flags_would_emit_both_joined_and_null_padded() -> None:
    before = IntervalJoinProcessor(RESTART_SPEC)
    run(before, RESTART[:3])
    good, bad = before.snapshot(), before.snapshot()
    for entry in bad["buffers"]["left"]:
        entry["unused"] = True
    assert joined({"id": "l1", "time": 10}, None, 4) in run(restore(bad), RESTART[3:], 3)
    assert rows_only(run(restore(good), RESTART[3:], 3)) == []


def test_snapshot_is_plain_json_and_restores_the_whole_state() -> None:
    p = IntervalJoinProcessor(spec(**JOIN2), output_watermarks="min_buffer")
    run(p, WALK[:4])
    snapshot = p.snapshot()
    assert json.loads(json.dumps(snapshot)) == snapshot
    assert snapshot["wm_state"] == {}
    assert snapshot["last_received"] == {"o.time": 103}
    assert snapshot["last_emitted"] == {"o.time": 102}
    assert snapshot["watermarked_columns"] == ["o.time", "d.time", "r.time"]
    assert snapshot["buffers"]["left"] == [{"row": L1, "unused": False}, {"row": L2, "unused": True}]
    restored = restore(snapshot)
    assert restored.snapshot() == snapshot
    assert restored.output_watermarks == "min_buffer"


def test_restore_refuses_an_unknown_snapshot_version() -> None:
    snapshot = IntervalJoinProcessor(EQ).snapshot()
    with pytest.raises(ConfigError, match="version"):
        restore({**snapshot, "version": 99})


# -- the algorithm, step by step ------------------------------------------------------------------

BETWEEN = "l.time BETWEEN r.time - 2 AND r.time + 2"


def test_late_row_is_dropped_and_counted_equal_time_is_not_late() -> None:
    p = IntervalJoinProcessor(spec(BETWEEN, join="full"))
    run(p, [WL("time", 10)])
    assert run(p, [L({"id": "late", "time": 9})], 1) == []
    assert p.metrics["late_rows_dropped"] == 1
    assert p.state.buffers["left"] == []
    run(p, [L({"id": "on_time", "time": 10})], 2)
    assert [e.row["id"] for e in p.state.buffers["left"]] == ["on_time"]


def test_late_row_is_quarantined_with_the_reason_under_late_quarantine() -> None:
    p = IntervalJoinProcessor(spec(BETWEEN, join="full", late="quarantine"))
    run(p, [WL("time", 10)])
    assert run(p, [L({"id": "late", "time": 9})], 1) == [
        {"quarantined": {"side": "left", "row": {"id": "late", "time": 9}},
         "reason": "late left row: l.time 1970-01-01T00:00:00.009Z is below its watermark "
                   "1970-01-01T00:00:00.010Z (by 1 ms)", "after_input": 1}]
    assert p.metrics["late_rows_quarantined"] == 1 and p.metrics["late_rows_dropped"] == 0
    assert p.state.buffers["left"] == []


def test_unbounded_column_output_watermark_follows_the_minimum_buffered_value() -> None:
    p = IntervalJoinProcessor(spec(**JOIN2))
    assert run(p, [WL("o.time", 50)]) == [wm("o.time", 50, 0)]  # nothing buffered
    assert run(p, [L({"o.time": 60, "d.time": 60}), WL("o.time", 70)], 1) == [wm("o.time", 60, 2)]
    # The row leaves only when the r.time watermark evicts it: then o.time catches up.
    assert run(p, [WR("r.time", 100)], 3) == [wm("o.time", 70, 3)]  # r.time: no d.time wm yet


def test_out_of_bounds_outer_row_is_null_padded_at_once_when_unmatched() -> None:
    p = IntervalJoinProcessor(spec(BETWEEN, join="right"))
    run(p, [L({"id": "a", "time": 5}), WL("time", 20)])  # wmState[r.time] = 18
    assert run(p, [R({"id": "b", "time": 7})], 2) == [joined({"id": "a", "time": 5},
                                                             {"id": "b", "time": 7}, 2)]
    assert run(p, [R({"id": "c", "time": 17})], 3) == [joined(None, {"id": "c", "time": 17}, 3)]
    assert p.state.buffers["right"] == []
    assert run(p, [R({"id": "d", "time": 18})], 4) == []  # at the bound: buffered, may still join
    assert [e.row["id"] for e in p.state.buffers["right"]] == ["d"]


@pytest.mark.parametrize(("join", "padded"), [("inner", []), ("left", ["l"]), ("right", ["r"]),
                                              ("full", ["l", "r"])])
def test_eviction_pads_only_unused_rows_of_outer_sides(join: str, padded: list[str]) -> None:
    p = IntervalJoinProcessor(spec(BETWEEN, join=join))
    run(p, [L({"id": "used", "time": 1}), R({"id": "used", "time": 1}),
            L({"id": "lonely", "time": 10}), R({"id": "lonely", "time": 30})])
    out = run(p, [WR("time", 100), WL("time", 100)], 4)
    got = sorted(side for item in rows_only(out)
                 for side, row in item["row"].items() if row is not None)
    assert got == sorted(padded)
    for item in rows_only(out):
        assert [r["id"] for r in item["row"].values() if r is not None] == ["lonely"]


def test_one_input_conjunct_filters_before_buffering() -> None:
    p = IntervalJoinProcessor(spec(f"{BETWEEN} AND l.v > 10 AND r.ok", join="full",
                                   left=("id", "time", "v"), right=("id", "time", "ok")))
    out = run(p, [L({"id": "a", "time": 1, "v": 9}), L({"id": "b", "time": 1, "v": None}),
                  R({"id": "c", "time": 1, "ok": False}), L({"id": "d", "time": 1, "v": 11}),
                  R({"id": "e", "time": 1, "ok": True})])
    assert out == [joined({"id": "a", "time": 1, "v": 9}, None, 0),
                   joined({"id": "b", "time": 1, "v": None}, None, 1),
                   joined(None, {"id": "c", "time": 1, "ok": False}, 2),
                   joined({"id": "d", "time": 1, "v": 11}, {"id": "e", "time": 1, "ok": True}, 4)]
    assert p.metrics["rows_filtered"] == 3
    assert [e.row["id"] for e in p.state.buffers["left"]] == ["d"]


def test_joined_rows_follow_buffer_order_and_the_whole_condition() -> None:
    p = IntervalJoinProcessor(spec(f"{BETWEEN} AND l.k = r.k", left=("id", "time", "k"),
                                   right=("id", "time", "k")))
    lefts = [{"id": i, "time": t, "k": k} for i, t, k in [(1, 0, "a"), (2, 5, "a"), (3, 1, "b"),
                                                          (4, 2, "a")]]
    run(p, [L(r) for r in lefts])
    right = {"id": 9, "time": 1, "k": "a"}
    assert run(p, [R(right)], 4) == [joined(lefts[0], right, 4), joined(lefts[3], right, 4)]


def test_stale_watermark_is_ignored_and_counted() -> None:
    p = IntervalJoinProcessor(spec(BETWEEN))
    run(p, [WL("time", 10), WR("time", 10)])
    assert run(p, [WL("time", 10), WL("time", 3)], 2) == []
    assert p.metrics["stale_watermarks_ignored"] == 2
    assert p.state.last_received[ColumnRef("left", "time")] == 10


def test_output_watermark_is_emitted_only_when_it_increases() -> None:
    p = IntervalJoinProcessor(spec(BETWEEN))
    assert run(p, [WL("time", 10), WR("time", 10)]) == [wm("l.time", 8, 1), wm("r.time", 8, 1)]
    # r.time = min(10, 11 - 2) = 9 increases; l.time = min(11, 10 - 2) = 8 does not.
    assert run(p, [WL("time", 11)], 2) == [wm("r.time", 9, 2)]


def test_output_watermark_does_not_depend_on_buffered_rows() -> None:
    """min(lastReceived, wmState): the same watermarks give the same output watermarks whatever
    the rows (the property that makes a restart safe in seed 003)."""
    marks = [WL("time", 10), WR("time", 4), WR("time", 30), WL("time", 40)]
    empty = [i for i in run(IntervalJoinProcessor(spec(BETWEEN)), marks) if "watermark" in i]
    busy = IntervalJoinProcessor(spec(BETWEEN))
    run(busy, [L({"id": 1, "time": 11}), R({"id": 2, "time": 5}), R({"id": 3, "time": 28})])
    assert [i for i in run(busy, marks) if "watermark" in i] == empty


def test_watermark_of_an_unbounded_column_makes_it_watermarked() -> None:
    # seed 003's join2 left input: o.time carries watermarks but no time bound.
    p = IntervalJoinProcessor(spec(**JOIN2))
    run(p, [WL("o.time", 50)])
    assert run(p, [L({"o.time": 49, "d.time": 60})], 1) == []
    assert p.metrics["late_rows_dropped"] == 1
    with pytest.raises(InputRecordError, match=r"field 'row\.o\.time': missing time column"):
        run(p, [L({"d.time": 60})], 2)


def test_input_watermark_may_use_the_qualified_name() -> None:
    p = IntervalJoinProcessor(EQ)
    run(p, [WL("l.time", 5)])
    assert p.state.last_received == {ColumnRef("left", "time"): 5}


def test_max_buffered_rows_names_the_limit_and_the_side() -> None:
    p = IntervalJoinProcessor(spec(BETWEEN, max_buffered_rows=2))
    run(p, [L({"id": 1, "time": 1}), R({"id": 2, "time": 1})])
    with pytest.raises(StateLimitError) as info:
        run(p, [R({"id": 3, "time": 2})], 2)
    message = str(info.value)
    assert "max_buffered_rows=2" in message and "right row" in message and "record 2" in message


def test_max_buffered_rows_counts_only_buffered_rows() -> None:
    p = IntervalJoinProcessor(spec(BETWEEN, join="left", max_buffered_rows=1))
    run(p, [L({"id": 1, "time": 1}), WR("time", 50)])  # wmState[l.time] = 48 evicts row 1
    run(p, [L({"id": 2, "time": 60})], 2)  # buffered: the one row the limit allows
    out = run(p, [L({"id": 3, "time": 20})], 3)  # out of bounds: joined, never buffered
    assert out == [joined({"id": 3, "time": 20}, None, 3)]
    assert (p.metrics["left_buffered"], p.metrics["right_buffered"]) == (1, 0)
    with pytest.raises(StateLimitError, match="buffering a right row"):
        run(p, [R({"id": 4, "time": 55})], 4)


# -- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "field", "message"), [
    ({"i": 0, "side": "middle", "row": {"id": 1, "time": 1}}, "side", "'left' or 'right'"),
    ({"i": 0, "side": "left"}, "row", "exactly one of"),
    ({"i": 0, "side": "left", "row": {"time": 1}, "watermark": {"time": 1}}, "row", "exactly one of"),
    ({"i": 0, "side": "left", "watermark": {"time": 1, "id": 2}}, "watermark", "exactly one column"),
    ({"i": 0, "side": "left", "watermark": {"time": "1"}}, "watermark.time", "integer"),
    ({"i": 0, "side": "left", "row": {"time": 1}, "ts": 3}, "ts", "unknown key"),
])
def test_malformed_records(raw: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputRecordError) as info:
        parse_interval_join_record(raw, 0)
    assert info.value.field == field and info.value.index == 0
    assert message in str(info.value)


@pytest.mark.parametrize(("op", "field", "message"), [
    (L({"id": 1}), "row.time", "missing time column"),
    (L({"id": 1, "time": "10"}), "row.time", "must be an integer"),
    (L({"id": 1, "time": 1.5}), "row.time", "must be an integer"),
    (L({"id": 1, "time": True}), "row.time", "must be an integer"),
    (L({"id": 1, "time": None}), "row.time", "must be an integer"),
    (R({"id": 1, "time": 1, "price": 3}), "row.price", "unknown column of the right input"),
    (WR("when", 5), "watermark.when", "unknown column of the right input"),
])
def test_bad_rows_name_the_record_and_field(op: Op, field: str, message: str) -> None:
    p = IntervalJoinProcessor(spec(BETWEEN))
    run(p, [L({"id": 0, "time": 0})])
    with pytest.raises(InputRecordError) as info:
        run(p, [op], 7)
    assert (info.value.index, info.value.field) == (7, field)
    assert message in str(info.value) and "record 7" in str(info.value)


KEYED = f"{BETWEEN} AND l.k = r.k"


@pytest.mark.parametrize(("left_key", "right_key"), [
    (1, "1"), (1, 1.0), (True, 1), (False, 0), ("a", 5), ({"id": 1}, {"id": 1.0}), ({"id": 1}, 1),
])
def test_keys_of_different_types_never_match(left_key: Any, right_key: Any) -> None:
    """The key rule of joins.core.keys: equal by value AND JSON type, never "cannot compare"."""
    p = IntervalJoinProcessor(spec(KEYED, join="full", left=("id", "time", "k"),
                                   right=("id", "time", "k")))
    run(p, [L({"id": 0, "time": 0, "k": left_key})])
    assert run(p, [R({"id": 1, "time": 0, "k": right_key})], 1) == []
    # The same keys, typed alike, do match (the rows are in bounds: only the key differs).
    assert run(p, [R({"id": 2, "time": 0, "k": left_key})], 2) == [
        {"row": {"l": {"id": 0, "time": 0, "k": left_key},
                 "r": {"id": 2, "time": 0, "k": left_key}}, "after_input": 2}]
    # The unmatched right row is emitted null-padded at eviction, as any other unmatched row.
    rows = [item["row"] for item in run(p, [WL("time", 100), WR("time", 100)], 3) if "row" in item]
    assert rows == [{"l": None, "r": {"id": 1, "time": 0, "k": right_key}}]


def test_object_keys_match_member_by_member_in_any_order() -> None:
    p = IntervalJoinProcessor(spec(KEYED, left=("id", "time", "k"), right=("id", "time", "k")))
    run(p, [L({"id": 0, "time": 0, "k": {"a": 1, "b": "x"}})])
    assert len(run(p, [R({"id": 1, "time": 1, "k": {"b": "x", "a": 1}})], 1)) == 1


def test_uncomparable_ordering_names_the_record() -> None:
    p = IntervalJoinProcessor(spec(f"{BETWEEN} AND l.k < 'm'", left=("id", "time", "k")))
    run(p, [L({"id": 0, "time": 0, "k": "a"})])
    with pytest.raises(InputRecordError, match=r"record 1.*cannot compare 5 with 'm'"):
        run(p, [L({"id": 1, "time": 0, "k": 5})], 1)


def test_string_key_taken_for_a_time_column_says_why() -> None:
    p = IntervalJoinProcessor(spec("l.time = r.time AND l.k = r.k", left=("time", "k"),
                                   right=("time", "k")))
    with pytest.raises(InputRecordError, match=re.escape("it is in the time bound `l.k = r.k`")):
        run(p, [L({"time": 0, "k": "a"})])


@pytest.mark.parametrize(("config", "message"), [
    ({"join": "cross"}, "config.join"),
    ({"grace_ms": 1}, "config.grace_ms: unknown key"),
    ({"left_columns": []}, "left_columns must list at least one column"),
    ({"right_columns": ["time", "time"]}, "lists column 'time' twice"),
    ({"max_buffered_rows": 0}, "config.max_buffered_rows"),
    ({"condition": "l.time >= r.time"}, "config.condition: no time bound"),
])
def test_bad_config(config: dict[str, Any], message: str) -> None:
    base = {"join": "inner", "condition": BETWEEN, "left_columns": ["id", "time"],
            "right_columns": ["id", "time"]}
    with pytest.raises(ConfigError, match=message):
        parse_spec(IntervalJoinSpec, {**base, **config}, operator="interval_join")


def _scenario(tmp_path: Path, config: dict[str, Any], inputs: list[dict[str, Any]]) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "operator": "interval_join", "config": config,
                                "input": inputs, "expected": [], "notes": "test"}))
    return str(path)


def test_cli_exits_2_on_bad_config_without_a_traceback(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario(tmp_path, {"join": "inner", "condition": "l.time > r.time OR l.id = r.id",
                                "left_columns": ["id", "time"], "right_columns": ["id", "time"]}, [])
    assert main(["replay", path]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "OR is not supported" in err and "Traceback" not in err


def test_cli_exits_2_on_a_bad_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario(tmp_path, {"join": "inner", "condition": BETWEEN,
                                "left_columns": ["id", "time"], "right_columns": ["id", "time"]},
                     [{"i": 0, "side": "left", "row": {"id": 1, "time": "soon"}}])
    assert main(["replay", path]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "record 0, field 'row.time'" in err and "Traceback" not in err


def test_cli_replays_a_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario(tmp_path, {"join": "inner", "condition": BETWEEN,
                                "left_columns": ["id", "time"], "right_columns": ["id", "time"]},
                     [{"i": 0, "side": "left", "row": {"id": 1, "time": 1}},
                      {"i": 1, "side": "right", "row": {"id": 2, "time": 2}}])
    assert main(["replay", path]) == EXIT_OK
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == [joined({"id": 1, "time": 1}, {"id": 2, "time": 2}, 1)]


# -- three streams: join1's output feeds join2 ---------------------------------------------------

def test_three_stream_join_matches_a_nested_loop_and_drops_nothing() -> None:
    """orders o JOIN deliveries d ON d.time BETWEEN o.time - 1 AND o.time + 3
    JOIN returns r ON r.time BETWEEN d.time - 1 AND d.time + 4 (seed 003's plan), with join1's
    rows and output watermarks forwarded to join2's left input."""
    rng = random.Random(3)
    orders = [{"o.id": f"o{i}", "o.time": t} for i, t in enumerate(sorted(rng.sample(range(40), 12)))]
    deliveries = [{"d.id": f"d{i}", "d.time": t}
                  for i, t in enumerate(sorted(rng.sample(range(40), 12)))]
    returns = [{"r.id": f"x{i}", "r.time": t} for i, t in enumerate(sorted(rng.sample(range(45), 10)))]
    join1 = IntervalJoinProcessor(spec("d.time BETWEEN o.time - 1 AND o.time + 3",
                                       left=("o.id", "o.time"), right=("d.id", "d.time")))
    join2 = IntervalJoinProcessor(spec("r.time BETWEEN d.time - 1 AND d.time + 4",
                                       left=("o.id", "o.time", "d.id", "d.time"),
                                       right=("r.id", "r.time")))
    streams = {"o": list(orders), "d": list(deliveries), "r": list(returns)}
    results: list[dict[str, Any]] = []
    i = 0

    def to_join2(items: list[dict[str, Any]]) -> None:
        nonlocal i
        for item in items:
            if "row" in item:
                op = L({**item["row"]["l"], **item["row"]["r"]})
            else:
                ((column, ts),) = item["watermark"].items()
                op = WL(column, ts)
            results.extend(run(join2, [op], i))
            i += 1

    def send(name: str, op: Op) -> None:
        nonlocal i
        if name == "r":
            results.extend(run(join2, [op], i))
            i += 1
        else:
            to_join2(run(join1, [op], i))

    while any(streams.values()):
        name = rng.choice([n for n, s in streams.items() if s])
        row = streams[name].pop(0)
        side = {"o": "left", "d": "right", "r": "right"}[name]
        send(name, ("row", side, row))
        send(name, ("wm", side, (f"{name}.time", row[f"{name}.time"])))
    for name, side in (("o", "left"), ("d", "right"), ("r", "right")):
        send(name, ("wm", side, (f"{name}.time", 1000)))

    expected = Counter(
        json.dumps({**o, **d, **r}, sort_keys=True)
        for o in orders for d in deliveries for r in returns
        if o["o.time"] - 1 <= d["d.time"] <= o["o.time"] + 3
        and d["d.time"] - 1 <= r["r.time"] <= d["d.time"] + 4)
    got = Counter(json.dumps({**x["row"]["l"], **x["row"]["r"]}, sort_keys=True)
                  for x in rows_only(results))
    assert got == expected
    assert sum(expected.values()) > 3  # the data is not trivially empty
    assert join2.metrics["late_rows_dropped"] == 0  # join1's output watermarks were sound
    assert join2.metrics["left_buffered"] == join2.metrics["right_buffered"] == 0


# -- property tests -----------------------------------------------------------------------------------

JOINS = ("inner", "left", "right", "full")


@st.composite
def interval_conditions(draw: st.DrawFn) -> tuple[str, Callable[[Row, Row], bool], bool, bool]:
    """(SQL, the same condition in plain Python, keyed, left-filtered): lo <= l.t - r.t <= hi."""
    lo = draw(st.integers(-3, 2))
    hi = draw(st.integers(lo, 3))
    form = draw(st.sampled_from(["between", "difference", "strict", "reversed"]))
    text = {
        "between": f"l.t BETWEEN r.t + ({lo}) AND r.t + ({hi})",
        "difference": f"l.t - r.t >= {lo} AND l.t - r.t <= {hi}",
        "strict": f"l.t > r.t + ({lo - 1}) AND l.t < r.t + ({hi + 1})",
        "reversed": f"r.t >= l.t - ({hi}) AND r.t <= l.t - ({lo})",
    }[form]
    keyed, filtered = draw(st.booleans()), draw(st.booleans())
    if keyed:
        text += " AND l.k = r.k"
    if filtered:
        text += " AND l.v > 0"

    def holds(left: Row, right: Row) -> bool:
        return (lo <= left["t"] - right["t"] <= hi and (not keyed or left["k"] == right["k"])
                and (not filtered or left["v"] > 0))
    return text, holds, keyed, filtered


def side_rows(prefix: str) -> st.SearchStrategy[list[Row]]:
    row = st.fixed_dictionaries({"t": st.integers(0, 12), "k": st.sampled_from("ab"),
                                 "v": st.integers(0, 1)})
    return st.lists(row, max_size=8).map(
        lambda rows: [{"id": f"{prefix}{n}", **r} for n, r in enumerate(rows)])


def nested_loop(join: str, lefts: list[Row], rights: list[Row],
                holds: Callable[[Row, Row], bool]) -> Counter[str]:
    out: list[dict[str, Any]] = [{"l": a, "r": b} for a in lefts for b in rights if holds(a, b)]
    if join in ("left", "full"):
        out += [{"l": a, "r": None} for a in lefts if not any(holds(a, b) for b in rights)]
    if join in ("right", "full"):
        out += [{"l": None, "r": b} for b in rights if not any(holds(a, b) for a in lefts)]
    return Counter(json.dumps(x, sort_keys=True) for x in out)


def in_order_ops(lefts: list[Row], rights: list[Row], order: list[bool]) -> list[Op]:
    """Each side's rows in non-decreasing time, each followed by its side's watermark at the
    row's time, interleaved by `order`; final watermarks flush both buffers."""
    lefts = sorted(lefts, key=lambda r: r["t"])
    rights = sorted(rights, key=lambda r: r["t"])
    ops: list[Op] = []
    queues = {"left": list(lefts), "right": list(rights)}
    for take_left in order + [True] * len(lefts) + [False] * len(rights):
        side = "left" if take_left else "right"
        if not queues[side]:
            continue
        row = queues[side].pop(0)
        ops += [("row", side, row), ("wm", side, ("t", row["t"]))]
    return [*ops, WL("t", 1000), WR("t", 1000)]


def output_rows(items: Iterable[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(i["row"], sort_keys=True) for i in items if "row" in i)


COLUMNS = ("id", "t", "k", "v")


def check_against_nested_loop(processor_type: type[IntervalJoinProcessor], join: str,
                              condition: tuple[str, Callable[[Row, Row], bool], bool, bool],
                              lefts: list[Row], rights: list[Row], order: list[bool]) -> bool:
    text, holds, _, _ = condition
    processor = processor_type(spec(text, join=join, left=COLUMNS, right=COLUMNS))
    out = run(processor, in_order_ops(lefts, rights, order))
    return (output_rows(out) == nested_loop(join, lefts, rights, holds)
            and processor.metrics["late_rows_dropped"] == 0)


@given(join=st.sampled_from(JOINS), condition=interval_conditions(), lefts=side_rows("a"),
       rights=side_rows("b"), order=st.lists(st.booleans(), max_size=20))
def test_in_order_streams_join_like_a_nested_loop_whatever_the_interleaving(
        join: str, condition: tuple[str, Callable[[Row, Row], bool], bool, bool],
        lefts: list[Row], rights: list[Row], order: list[bool]) -> None:
    """(c): with in-order inputs and watermarks at each side's current time, the result is the
    nested-loop join (plus null-padded unmatched rows for outer sides) for every interleaving."""
    assert check_against_nested_loop(IntervalJoinProcessor, join, condition, lefts, rights, order)


class _EvictsAtTheBound(IntervalJoinProcessor):
    """Mutant: evicts rows equal to the lower bound, which a future row can still join."""

    def _evict(self) -> list[dict[str, Any]]:
        for inner in self.state.wm_state.values():
            for key in inner:
                inner[key] += 1
        try:
            return super()._evict()
        finally:
            for inner in self.state.wm_state.values():
                for key in inner:
                    inner[key] -= 1


class _LateAtTheWatermark(IntervalJoinProcessor):
    """Mutant: treats a row at the watermark as late."""

    def _late_column(self, side: Any, row: Any) -> Any:
        return next((c for c in self._time_columns(side) if c in self.state.last_received
                     and row[c.name] <= self.state.last_received[c]), None)


@pytest.mark.parametrize("mutant", [_EvictsAtTheBound, _LateAtTheWatermark])
def test_the_nested_loop_property_catches_mutants(mutant: type[IntervalJoinProcessor]) -> None:
    rng = random.Random(7)
    caught = 0
    for _ in range(60):
        lo = rng.randint(-2, 1)
        hi = rng.randint(lo, 2)

        def holds(a: Row, b: Row, lo: int = lo, hi: int = hi) -> bool:
            return lo <= a["t"] - b["t"] <= hi
        condition = (f"l.t BETWEEN r.t + ({lo}) AND r.t + ({hi})", holds, False, False)
        lefts = [{"id": f"a{n}", "t": rng.randint(0, 6), "k": "a", "v": 1} for n in range(5)]
        rights = [{"id": f"b{n}", "t": rng.randint(0, 6), "k": "a", "v": 1} for n in range(5)]
        order = [rng.random() < 0.5 for _ in range(10)]
        join = rng.choice(JOINS)
        assert check_against_nested_loop(IntervalJoinProcessor, join, condition, lefts, rights, order)
        caught += not check_against_nested_loop(mutant, join, condition, lefts, rights, order)
    assert caught > 0


@st.composite
def arbitrary_ops(draw: st.DrawFn) -> list[Op]:
    """Out-of-order rows and watermarks (some stale) on both sides."""
    ops: list[Op] = []
    for n in range(draw(st.integers(0, 30))):
        side = draw(st.sampled_from(["left", "right"]))
        if draw(st.integers(0, 3)) == 0:
            ops.append(("wm", side, ("t", draw(st.integers(0, 12)))))
        else:
            ops.append(("row", side, {"id": f"{side[0]}{n}", "t": draw(st.integers(0, 10)),
                                      "k": draw(st.sampled_from("ab")), "v": draw(st.integers(0, 1))}))
    return ops


@settings(max_examples=examples(200))
@given(join=st.sampled_from(JOINS), condition=interval_conditions(), data=st.data(),
       policy=st.sampled_from(["wm_state", "min_buffer"]))
def test_snapshot_and_restore_at_any_point_changes_nothing(
        join: str, condition: tuple[str, Callable[[Row, Row], bool], bool, bool],
        data: st.DataObject, policy: WatermarkPolicy) -> None:
    """(d): a run interrupted anywhere and restored from its JSON snapshot into a fresh processor
    emits exactly what an uninterrupted run emits, in the same order, with the same metrics."""
    the_spec = spec(condition[0], join=join, left=COLUMNS, right=COLUMNS)
    whole = IntervalJoinProcessor(the_spec, output_watermarks=policy)
    ops = data.draw(arbitrary_ops(), label="ops")
    cut = data.draw(st.integers(0, len(ops)), label="cut")
    expected = run(whole, ops)
    first = IntervalJoinProcessor(the_spec, output_watermarks=policy)
    out = run(first, ops[:cut])
    resumed = restore(json.loads(json.dumps(first.snapshot())))
    out += run(resumed, ops[cut:], cut)
    assert out == expected
    assert resumed.metrics == whole.metrics


@given(join=st.sampled_from(JOINS), condition=interval_conditions(), ops=arbitrary_ops(),
       policy=st.sampled_from(["wm_state", "min_buffer"]))
def test_output_watermarks_are_never_overtaken(
        join: str, condition: tuple[str, Callable[[Row, Row], bool], bool, bool], ops: list[Op],
        policy: WatermarkPolicy) -> None:
    """After an output watermark {column: w}, no emitted row carries that column below w, and no
    non-late input row is lost: each is joined, null-padded (outer), filtered or still buffered."""
    the_spec = spec(condition[0], join=join, left=COLUMNS, right=COLUMNS)
    p = IntervalJoinProcessor(the_spec, output_watermarks=policy)
    out = run(p, ops)
    emitted: dict[str, int] = {}
    for item in out:
        if "watermark" in item:
            ((name, value),) = item["watermark"].items()
            assert name not in emitted or value > emitted[name]
            emitted[name] = value
            continue
        for alias, row in item["row"].items():
            name = f"{alias}.t"
            if row is not None and name in emitted:
                assert row["t"] >= emitted[name], (item, emitted)
    m = p.metrics
    assert m["rows_received"] == sum(1 for op in ops if op[0] == "row")
    assert m["rows_buffered"] == m["rows_evicted"] + m["left_buffered"] + m["right_buffered"]
