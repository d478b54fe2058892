"""The comparison modes of the scenario contract (FORMAT.md), each shown to accept and reject."""

from __future__ import annotations

import pytest

from joins.microbatch import compact_table_items, cut_batches
from joins.scenario.compare import compare


def item(key, value, step, **extra):
    return {"key": key, "value": value, "after_input": step, **extra}


def test_ordered_accepts_exact_and_ignores_absent_fields() -> None:
    actual = [item("a", 1, 0, ts=5), item("b", 2, 1, ts=6)]
    assert compare([{"key": "a", "value": 1, "after_input": 0}, {"key": "b", "value": 2}],
                   actual, "ordered") is None


def test_ordered_rejects_swapped_and_missing() -> None:
    actual = [item("a", 1, 0), item("b", 2, 1)]
    assert compare([item("b", 2, 1), item("a", 1, 0)], actual, "ordered") is not None
    diff = compare([item("a", 1, 0)], actual, "ordered")
    assert diff is not None and "(nothing)" in diff


def test_per_step_is_a_multiset_per_after_input() -> None:
    actual = [item("a", 1, 0), item("b", 2, 0), item("c", 3, 1)]
    assert compare([item("b", 2, 0), item("a", 1, 0), item("c", 3, 1)], actual, "per_step") is None
    assert compare([item("b", 2, 0), item("a", 1, 1), item("c", 3, 1)], actual, "per_step") is not None


def test_multiset_needs_a_full_matching_not_a_greedy_one() -> None:
    # The first expected item (fewer fields) could steal the only match of the second.
    expected = [{"key": "a"}, {"key": "a", "value": 1}]
    actual = [item("a", 1, 0), item("a", 2, 0)]
    assert compare(expected, actual, "multiset") is None
    assert compare([*expected, {"key": "a"}], actual, "multiset") is not None


def test_last_per_step_compares_last_value_per_key_and_silent_steps() -> None:
    actual = [item("a", 1, 0), item("a", 2, 0), item("b", 9, 1)]
    assert compare([item("a", 2, 0), item("b", 9, 1)], actual, "last_per_step") is None
    assert compare([item("a", 1, 0), item("b", 9, 1)], actual, "last_per_step") is not None
    # A step with no expected item must emit nothing.
    assert compare([item("a", 2, 0)], actual, "last_per_step") is not None


def test_final_is_last_value_per_key_with_tombstones_as_absence() -> None:
    actual = [item("a", 1, 0), item("b", 1, 1), item("b", None, 2)]
    assert compare([item("a", 1, 5)], actual, "final") is None
    assert compare([item("a", 1, 5), item("b", 1, 1)], actual, "final") is not None


def test_watermarks_ignored_unless_expected_holds_one() -> None:
    actual = [{"watermark": {"t": 1}, "after_input": 0}, {"row": {"l": 1}, "after_input": 1}]
    assert compare([{"row": {"l": 1}}], actual, "ordered") is None
    assert compare([{"watermark": {"t": 2}}, {"row": {"l": 1}}], actual, "ordered") is not None


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError):
        compare([], [], "sorted")


def test_compaction_keeps_last_per_key_with_first_old_value() -> None:
    items = [{"key": "a", "value": 1, "old_value": None}, {"quarantined": {"key": "x"}},
             {"key": "b", "value": 5, "old_value": 4}, {"key": "a", "value": 2, "old_value": 1}]
    assert compact_table_items(items) == [
        {"quarantined": {"key": "x"}}, {"key": "b", "value": 5, "old_value": 4},
        {"key": "a", "value": 2, "old_value": None}]


def test_cut_batches() -> None:
    assert [list(b) for b in cut_batches([1, 2, 3, 4, 5], 2)] == [[1, 2], [3, 4], [5]]
    assert [list(b) for b in cut_batches([1, 2, 3], None)] == [[1, 2, 3]]
    with pytest.raises(ValueError):
        list(cut_batches([1], 0))


def test_compaction_never_lets_an_out_of_order_item_hide_the_latest() -> None:
    items = [{"key": "a", "value": 10, "old_value": None, "ts": 10},
             {"key": "a", "value": None, "old_value": 10, "ts": 5, "is_latest": False},
             {"key": "b", "value": 1, "ts": 3, "is_latest": False}]
    assert compact_table_items(items) == [
        {"key": "a", "value": 10, "old_value": None, "ts": 10},
        {"key": "b", "value": 1, "ts": 3, "is_latest": False}]
