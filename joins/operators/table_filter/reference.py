"""The `table_filter` reference processor: KTable#filter on a versioned or unversioned table.

Kafka Streams' shape, which this processor mirrors: the table source keeps the input in a store;
on each update it reads the key's current value (`get(key)`: the latest by arrival in an
unversioned store, the latest by timestamp in a versioned one), puts the update, and forwards
the change `(new value, old value, is_latest)` (here one put answers all three: the store's
`PutResult` carries the previous value and the outcome); an update the versioned store refuses
as older than its history retention is not forwarded at all. The filter maps both sides of the
change through the predicate (a value that fails it becomes null) and forwards the result.

Seed 002 (KIP-914): "table filter processors today have an optimization to drop null results if
the previous result for the same key was also null. This optimization will be disabled if the
table being filtered is versioned."

The rules, exactly as this processor applies them:

- Output per forwarded update: `{"key", "value", "old_value", "ts", "is_latest"}`. `value` is the
  record's value if it passes the predicate, else null (a tombstone); `old_value` is the key's
  previous value, filtered the same way; `ts` is the record's ts.
- Unversioned input: "previous" means previous by arrival, and an update whose old and new
  filtered values are both null is not forwarded (`null_to_null_dropped`).
- Versioned input: every update the store takes is forwarded, a rejected one as a tombstone,
  because a downstream versioned table needs that tombstone in its history (a value older than
  the latest version can still be the one valid at some timestamp).
- Versioned input, out-of-order update (ts older than the key's latest ts): forwarded with
  `is_latest: false`; its `old_value` is the filtered LATEST value, which the update does not
  replace, exactly as Kafka's table source reads `get(key)` before the put. A consumer that keeps
  the result as a versioned table files it into history; the latest result is unchanged.
- Versioned input, update older than the store's stream time minus history retention: the store
  refuses it and nothing is forwarded (`expired`).
- Predicate evaluation never fails: a field the value does not hold fails the predicate whatever
  the op, even `ne` / `not_in` (`missing_field`); `lt` / `le` / `gt` / `ge` between anything but
  two numbers or two strings fail it (`incomparable`); `eq` / `ne` / `in` / `not_in` use JSON
  equality (true is not 1). A tombstone is not evaluated: it stays null.

`metrics` counts what was not forwarded (`null_to_null_dropped`, `expired`), out-of-order updates
forwarded with `is_latest: false` (`out_of_order_forwarded`), and predicate evaluations on new
values that failed for want of a field or a comparable type.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Literal

from joins.core.fields import MISSING, is_number, json_equal, read_path
from joins.core.operator import Item
from joins.core.store import make_store
from joins.operators.table_filter.spec import ORDERING_OPS, PredicateSpec, TableFilterSpec, TableRecord

METRIC_NAMES: tuple[str, ...] = (
    "null_to_null_dropped",     # unversioned: old and new filtered values both null
    "expired",                  # versioned: refused by the store (beyond history retention)
    "out_of_order_forwarded",   # versioned: forwarded with is_latest false
    "missing_field",            # new values without the predicate's field (fail the predicate)
    "incomparable",             # new values an ordering op cannot compare (fail the predicate)
)

Verdict = Literal["pass", "fail", "missing_field", "incomparable"]

_ORDERING: dict[str, Callable[[Any, Any], bool]] = {
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
}


def evaluate(predicate: PredicateSpec, value: Any) -> Verdict:
    """The predicate's verdict on a non-null table value; only "pass" keeps the value."""
    subject = read_path(value, predicate.field)
    if subject is MISSING:
        return "missing_field"
    op, operand = predicate.op, predicate.value
    if op in ORDERING_OPS:
        comparable = ((is_number(subject) and is_number(operand))
                      or (isinstance(subject, str) and isinstance(operand, str)))
        if not comparable:
            return "incomparable"
        return "pass" if _ORDERING[op](subject, operand) else "fail"
    if op == "eq":
        result = json_equal(subject, operand)
    elif op == "ne":
        result = not json_equal(subject, operand)
    else:
        member = any(json_equal(subject, candidate) for candidate in operand)
        result = member if op == "in" else not member
    return "pass" if result else "fail"


class TableFilterProcessor:
    """KTable#filter, one input update at a time."""

    def __init__(self, spec: TableFilterSpec) -> None:
        self.spec = spec
        self._store = make_store(spec.versioned, spec.retention_ms)
        self.metrics: dict[str, int] = dict.fromkeys(METRIC_NAMES, 0)

    def _filtered(self, value: Any, *, count: bool) -> Any:
        if value is None:
            return None
        verdict = evaluate(self.spec.predicate, value)
        if count and verdict in ("missing_field", "incomparable"):
            self.metrics[verdict] += 1
        return value if verdict == "pass" else None

    def process(self, record: TableRecord) -> list[Item]:
        put = self._store.put(record.key, record.value, record.ts)
        if put.outcome == "expired":
            self.metrics["expired"] += 1
            return []
        new_value = self._filtered(record.value, count=True)
        old_value = self._filtered(None if put.previous is None else put.previous.value,
                                   count=False)
        if not self.spec.versioned and new_value is None and old_value is None:
            self.metrics["null_to_null_dropped"] += 1
            return []
        if put.outcome == "out_of_order":
            self.metrics["out_of_order_forwarded"] += 1
        return [{"key": record.key, "value": new_value, "old_value": old_value, "ts": record.ts,
                 "is_latest": put.is_latest}]
