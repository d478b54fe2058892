"""Compare emitted items with a scenario's `expected` under its `expected_mode`.

A field absent from an expected item is not compared. When `expected` holds no watermark item,
watermark items are left out of the comparison.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from joins.core.keys import KeyId, key_id
from joins.core.operator import Item


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def item_matches(expected: Item, actual: Item) -> bool:
    return all(k in actual and _canon(actual[k]) == _canon(v) for k, v in expected.items())


def _match_multiset(expected: list[Item], actual: list[Item]) -> tuple[list[Item], list[Item]]:
    """Maximum bipartite matching (expected fields ⊆ actual); returns (unmatched exp, unmatched act)."""
    match_of_actual: dict[int, int] = {}
    candidates = [[j for j, a in enumerate(actual) if item_matches(e, a)] for e in expected]

    def augment(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in match_of_actual or augment(match_of_actual[j], seen):
                match_of_actual[j] = i
                return True
        return False

    matched_expected = {i for i in range(len(expected)) if augment(i, set())}
    unmatched_e = [e for i, e in enumerate(expected) if i not in matched_expected]
    unmatched_a = [a for j, a in enumerate(actual) if j not in match_of_actual]
    return unmatched_e, unmatched_a


def _fmt(items: list[Item]) -> str:
    return "\n".join("    " + _canon(i) for i in items) or "    (none)"


def _by_step(items: list[Item]) -> dict[Any, list[Item]]:
    groups: dict[Any, list[Item]] = defaultdict(list)
    for it in items:
        groups[it.get("after_input")].append(it)
    return groups


def _last_per_key(items: list[Item]) -> dict[KeyId, Item]:
    out: dict[KeyId, Item] = {}
    for it in items:
        out[key_id(it.get("key"))] = it
    return out


def compare(expected: list[Item], actual: list[Item], mode: str) -> str | None:
    """None on agreement, else a readable diff."""
    if not any("watermark" in e for e in expected):
        actual = [a for a in actual if "watermark" not in a]
    problems: list[str] = []
    if mode == "ordered":
        for pos in range(max(len(expected), len(actual))):
            e = expected[pos] if pos < len(expected) else None
            a = actual[pos] if pos < len(actual) else None
            if e is None or a is None or not item_matches(e, a):
                problems.append(f"  item {pos}:\n    expected {_canon(e) if e is not None else '(nothing)'}"
                                f"\n    actual   {_canon(a) if a is not None else '(nothing)'}")
    elif mode in ("per_step", "multiset"):
        groups_e = _by_step(expected) if mode == "per_step" else {None: expected}
        groups_a = _by_step(actual) if mode == "per_step" else {None: actual}
        for step in sorted(set(groups_e) | set(groups_a), key=lambda s: (s is None, s)):
            ue, ua = _match_multiset(groups_e.get(step, []), groups_a.get(step, []))
            if ue or ua:
                label = f"after_input {step}" if mode == "per_step" else "whole run"
                problems.append(f"  {label}:\n   expected but not emitted:\n{_fmt(ue)}"
                                f"\n   emitted but not expected:\n{_fmt(ua)}")
    elif mode == "last_per_step":
        groups_e, groups_a = _by_step(expected), _by_step(actual)
        for step in sorted(set(groups_e) | set(groups_a), key=lambda s: (s is None, s)):
            me, ma = _last_per_key(groups_e.get(step, [])), _last_per_key(groups_a.get(step, []))
            for k in sorted(set(me) | set(ma)):
                e, a = me.get(k), ma.get(k)
                if e is None or a is None or not item_matches(e, a):
                    problems.append(f"  after_input {step}, key {k}:\n    expected "
                                    f"{_canon(e) if e is not None else '(nothing)'}\n    actual   "
                                    f"{_canon(a) if a is not None else '(nothing)'}")
    elif mode == "final":
        me = {k: v for k, v in _last_per_key(expected).items() if v.get("value") is not None}
        ma = {k: v for k, v in _last_per_key(actual).items() if v.get("value") is not None}
        for k in sorted(set(me) | set(ma)):
            e, a = me.get(k), ma.get(k)
            # after_input is where a value was emitted, not part of the final table.
            e_cmp = {f: v for f, v in (e or {}).items() if f != "after_input"}
            if e is None or a is None or not item_matches(e_cmp, a):
                problems.append(f"  final value of key {k}:\n    expected "
                                f"{_canon(e) if e is not None else '(absent)'}\n    actual   "
                                f"{_canon(a) if a is not None else '(absent)'}")
    else:
        raise ValueError(f"unknown expected_mode {mode!r}")
    if not problems:
        return None
    return f"{len(problems)} difference(s) (mode {mode}):\n" + "\n".join(problems)
