"""The `table_map` reference processor: KTable#mapValues as a projection with renames, on a
versioned or unversioned table.

Kafka Streams' shape, which this processor mirrors (`KTableSource` then `KTableMapValues`): the
table source puts each update into its store and forwards the change `(new value, old value,
is_latest)` (one put answers all three here: the store's `PutResult` carries the previous
value and the outcome); an update a versioned store refuses as older than its history
retention is not forwarded. mapValues maps both sides of the change and forwards it; unlike
KTable#filter it has no null-to-null drop, so a tombstone of a key the table does not hold is
forwarded too (as `(null, null)`), as Kafka's processor forwards it.

The rules, exactly as this processor applies them:

- Output per forwarded update: `{"key", "value", "old_value", "ts", "is_latest"}`. `value` is
  the record's value projected (`{name: value at field, ...}` in the spec's order; a field the
  value does not hold reads as null, as `value.get(name)` would), or null for a tombstone;
  `old_value` is the key's previous value projected the same way; `ts` is the record's ts.
- Unversioned input: "previous" means previous by arrival.
- Versioned input, out-of-order update (ts older than the key's latest ts): forwarded with
  `is_latest: false` and the projected LATEST value as `old_value` (the update does not replace
  it), exactly as for `table_filter`.
- Versioned input, update older than the store's stream time minus history retention: refused
  by the store, nothing forwarded (`expired`).

`metrics` counts `expired` updates and out-of-order ones forwarded (`out_of_order_forwarded`).
"""

from __future__ import annotations

from typing import Any

from joins.core.fields import MISSING, read_path
from joins.core.operator import Item
from joins.core.store import make_store
from joins.core.versioned import TableRecord
from joins.operators.table_map.spec import TableMapSpec

METRIC_NAMES: tuple[str, ...] = ("expired", "out_of_order_forwarded")


def project(spec: TableMapSpec, value: Any) -> Any:
    """A non-null value's output fields; a tombstone stays null."""
    if value is None:
        return None
    out = {}
    for column in spec.columns:
        part = read_path(value, column.field)
        out[column.name] = None if part is MISSING else part
    return out


class TableMapProcessor:
    """KTable#mapValues, one input update at a time."""

    def __init__(self, spec: TableMapSpec) -> None:
        self.spec = spec
        self._store = make_store(spec.versioned, spec.retention_ms)
        self.metrics: dict[str, int] = dict.fromkeys(METRIC_NAMES, 0)

    def process(self, record: TableRecord) -> list[Item]:
        put = self._store.put(record.key, record.value, record.ts)
        if put.outcome == "expired":
            self.metrics["expired"] += 1
            return []
        if put.outcome == "out_of_order":
            self.metrics["out_of_order_forwarded"] += 1
        previous = None if put.previous is None else put.previous.value
        return [{"key": record.key, "value": project(self.spec, record.value),
                 "old_value": project(self.spec, previous), "ts": record.ts,
                 "is_latest": put.is_latest}]
