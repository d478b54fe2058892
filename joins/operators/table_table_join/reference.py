"""The `table_table_join` reference processor: KTable#join / leftJoin / outerJoin on the primary key.

Seed 000 (KIP-914): "whenever a new record arrives at the processor, a get(key) lookup is
performed on the opposite table's materialization to find the record to join with, and the join
result is emitted with the larger timestamp of the two records being joined." With versioned
tables, "if the new record is not out-of-order, emit the latest join result. Else, emit nothing."
Versioning is per side: "out-of-order records from the versioned side will not trigger a new join
result, but out-of-order records from the unversioned side will."

The rules, exactly as this processor applies them:

- Each side lives in its own store, versioned or not per its config. An update of side S is put
  into S's store, whose answer says whether it is the key's latest value and what S's current
  value was before it (the old value: latest by timestamp if S is versioned, by arrival if not);
  then the other side's current value is read.
- A versioned side's update older than that side's latest ts for the key is still put into the
  store (it becomes history) but emits nothing, not even a tombstone (`out_of_order_ignored`).
  An update the versioned store refuses as older than its history retention emits nothing either
  (`expired`). An equal ts replaces the latest version and counts as in order.
- Otherwise the result before the update is join(old, other) and after it join(new, other), where
  inner needs both values, left needs the left value, outer needs either. If neither exists the
  update emits nothing; else it emits `{"key", "value": [left, right] | null, "ts"}`, a null value
  being a tombstone for a result that no longer exists (Kafka's sendOldValues tracking).
- `ts` follows Kafka Streams (KTableKTable*Join and its value getters): the larger of the
  update's ts and the ts of the other side's CURRENT value; where the other side has no current
  value (never written, or deleted by a tombstone) only the update's ts counts. A versioned side
  reads its latest tombstone as "no value", exactly as Kafka's versioned value getter does.
- Keys are equal by value and JSON type (`joins.core.keys`): 1 and 1.0 are two keys.

So a key's results can go back in time even with both sides versioned: (a5, null)@9 from a
right-side delete at 9 can be followed by (a6, null)@6 from an in-order left update at 6, since
the deleted right side no longer holds a timestamp (`000_table_table_left_join_versioned_delete_ts`).
The last result of a key is still the join of both sides' current values (latest by timestamp
on a versioned side, latest by arrival on an unversioned one).
"""

from __future__ import annotations

from typing import Any

from joins.core.operator import Item
from joins.core.store import TableStore, make_store
from joins.operators.table_table_join.spec import Side, TableTableJoinRecord, TableTableJoinSpec

METRIC_NAMES: tuple[str, ...] = (
    "out_of_order_ignored",     # versioned side: older than the key's latest ts, no result
    "expired",                  # versioned side: refused by the store (beyond history retention)
)

_OTHER: dict[Side, Side] = {"left": "right", "right": "left"}


class TableTableJoinProcessor:
    """The primary-key table-table join, one input update at a time."""

    def __init__(self, spec: TableTableJoinSpec) -> None:
        self.spec = spec
        self._stores: dict[Side, TableStore] = {
            name: make_store(spec.side(name).versioned, spec.side(name).retention_ms)
            for name in ("left", "right")
        }
        self.metrics: dict[str, int] = dict.fromkeys(METRIC_NAMES, 0)

    def store(self, side: Side) -> TableStore:
        """One side's materialisation (read-only use: inspection in tests and tools)."""
        return self._stores[side]

    def join_value(self, left: Any, right: Any) -> list[Any] | None:
        """The joined value of one key given both sides' values, or None when no result exists."""
        if self.spec.join == "inner":
            present = left is not None and right is not None
        elif self.spec.join == "left":
            present = left is not None
        else:
            present = left is not None or right is not None
        return [left, right] if present else None

    def process(self, record: TableTableJoinRecord) -> list[Item]:
        put = self._stores[record.side].put(record.key, record.value, record.ts)
        if put.outcome == "expired":
            self.metrics["expired"] += 1
            return []
        if put.outcome == "out_of_order":
            self.metrics["out_of_order_ignored"] += 1
            return []
        other = self._stores[_OTHER[record.side]].get(record.key)
        other_value = None if other is None else other.value
        old_value = None if put.previous is None else put.previous.value

        def oriented(value: Any) -> tuple[Any, Any]:
            return (value, other_value) if record.side == "left" else (other_value, value)

        old_result = self.join_value(*oriented(old_value))
        new_result = self.join_value(*oriented(record.value))
        if old_result is None and new_result is None:
            return []
        ts = record.ts if other is None else max(record.ts, other.valid_from)
        return [{"key": record.key, "value": new_result, "ts": ts}]
