"""The `table_aggregate` reference processor: KGroupedTable#aggregate / count on a table.

Kafka Streams' shape, which this processor mirrors: each update of the input table carries its
old and its new value; the old value is subtracted from the aggregate of its old group and the
new value added to the aggregate of its new group. Seed 002 (KIP-914): "table aggregate
processors will be updated to ignore out-of-order records (by key) when aggregating a versioned
table":

    Record (all with same key)   Effect on unversioned aggregate   Effect on versioned aggregate
    (v1, ts=1)                   add: v1                           add: v1
    (v2, ts=10)                  remove: v1 ; add: v2              remove: v1 ; add: v2
    (v3, ts=5)                   remove: v2 ; add: v3              nothing -- v3 is older than v2

The rules, exactly as this processor applies them:

- A group holds the input keys whose current value falls in it (its members) and each member's
  contribution. An update takes the key out of the group of its old value and puts it into the
  group of its new value; a tombstone only takes it out.
- Unversioned input: every update applies, in arrival order. Versioned input: an update older
  than the key's latest ts is ignored completely (`out_of_order_ignored`; the input store still
  files it as history), an update refused as beyond history retention too (`expired`); a latest
  tombstone still subtracts. An equal ts replaces the latest value and applies.
- Output: one item `{"key": group, "value": aggregate, "ts"}` per group the update touched, the
  old group first; a single item when old and new group are the same. A group left without
  members emits its aggregate after the subtraction, never a tombstone: a count or sum of 0, a
  concat of "" — Kafka's KTableAggregate stores and forwards whatever the subtractor returns
  (`count()` goes to 0); the seed is silent. A user who wants the empty groups gone filters
  the zeros, as with Kafka.
- `ts` is the larger of the update's ts and the ts of the group's previous output, as Kafka's
  KTableAggregate does, so a group's results never go back in time (also across its deletion).
- `count`: the number of members. `sum`: the sum of the members' numeric `field`. `concat`: the
  members' `field` (or whole value) joined with "," in the order of their input keys (numbers
  numerically, then strings, then other keys by their canonical JSON); a string is taken as is,
  any other JSON value in its canonical JSON spelling. The aggregate is computed from the members
  rather than kept as a running total, so a float sum does not drift with the update history and
  equals a from-scratch aggregation of the current input table.
- A value whose group key is null (or absent: a missing field reads as null, as a mapper
  reading a JSON field would) joins no group: the key leaves its old group as on a tombstone,
  and the record is counted (`null_group_key_skipped`). Kafka's KTableRepartitionMap does the
  same ("if the selected repartition key or value is null, skip": the old pair is still
  subtracted), and a record with a null group key never stops the processor.
- Otherwise a non-tombstone value must yield a group key that is not an array and, for sum, a
  number at `field` (for concat with a field, a present field); anything else raises an
  InputRecordError naming the record and the field, before any state changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from joins.core.fields import MISSING, canonical_json, is_number, read_path
from joins.core.keys import KeyId, key_id
from joins.core.operator import Item
from joins.core.store import make_store
from joins.core.versioned import TableRecord
from joins.errors import InputRecordError
from joins.operators.table_aggregate.spec import OPERATOR, TableAggregateSpec

METRIC_NAMES: tuple[str, ...] = (
    "out_of_order_ignored",     # versioned: older than the key's latest ts, not aggregated
    "expired",                  # versioned: refused by the store (beyond history retention)
    "null_group_key_skipped",   # the value's group key is null or absent: in no group
)

# Sort key of an input key: (rank, value, canonical JSON), so that numbers and strings never meet.
KeyOrder = tuple[int, Any, str]


def key_order(key: Any) -> KeyOrder:
    """The order in which a group's members are concatenated."""
    spelling = key_id(key)
    if is_number(key):
        return (0, key, spelling)
    if isinstance(key, str):
        return (1, key, spelling)
    return (2, spelling, spelling)


def render(part: Any) -> str:
    """A concat contribution: a string as is, any other JSON value as canonical JSON."""
    return part if isinstance(part, str) else canonical_json(part)


@dataclass(frozen=True)
class Membership:
    """Where one input key's current value sits: its group and what it contributes."""

    group_id: KeyId
    order: KeyOrder
    contribution: Any


@dataclass
class Group:
    key: Any
    members: dict[KeyId, Membership] = field(default_factory=dict)
    # ts of the group's last output; kept after the group empties so time never goes back.
    ts: int | None = None


class TableAggregateProcessor:
    """The table aggregate, one input update at a time."""

    def __init__(self, spec: TableAggregateSpec) -> None:
        self.spec = spec
        self._store = make_store(spec.versioned, spec.retention_ms)
        # Groups and members are keyed by key identity (joins.core.keys): group keys 1 and 1.0
        # are two groups, as they would be two keys of Kafka's repartition topic.
        self._groups: dict[KeyId, Group] = {}
        # input key id -> group id of its current value
        self._member_of: dict[KeyId, KeyId] = {}
        self.metrics: dict[str, int] = dict.fromkeys(METRIC_NAMES, 0)

    def _bad(self, record: TableRecord, path: str | None, message: str) -> InputRecordError:
        where = "value" if path is None else f"value.{path}"
        return InputRecordError(message, index=record.i, field=where, record=record.model_dump(),
                                source=f"{OPERATOR} input")

    def _place(self, record: TableRecord) -> tuple[Any, Any] | None:
        """(group key, contribution) of a non-tombstone value, None when its group key is
        null or absent (in no group), or an InputRecordError."""
        value = record.value
        path = self.spec.group_path
        group_key = read_path(value, path)
        if group_key is MISSING or group_key is None:
            return None
        if isinstance(group_key, list):
            raise self._bad(record, path, "a group key must be a JSON scalar or object, got "
                            f"{canonical_json(group_key)}")
        aggregate = self.spec.aggregate
        if aggregate.function == "count":
            return group_key, 1
        part = read_path(value, aggregate.field)
        if part is MISSING:
            raise self._bad(record, aggregate.field,
                            f"has no field {aggregate.field!r} to {aggregate.function}")
        if aggregate.function == "sum":
            if not is_number(part):
                raise self._bad(record, aggregate.field,
                                f"sum needs a number, got {canonical_json(part)}")
            return group_key, part
        return group_key, render(part)

    def _aggregate(self, group: Group) -> Any:
        members = sorted(group.members.values(), key=lambda m: m.order)
        function = self.spec.aggregate.function
        if function == "count":
            return len(members)
        if function == "sum":
            return sum(m.contribution for m in members)
        return ",".join(m.contribution for m in members)

    def process(self, record: TableRecord) -> list[Item]:
        placement = None if record.value is None else self._place(record)
        put = self._store.put(record.key, record.value, record.ts)
        if put.outcome == "expired":
            self.metrics["expired"] += 1
            return []
        if put.outcome == "out_of_order":
            self.metrics["out_of_order_ignored"] += 1
            return []
        if record.value is not None and placement is None:
            self.metrics["null_group_key_skipped"] += 1
        member_id = key_id(record.key)
        touched: list[KeyId] = []
        old_group_id = self._member_of.pop(member_id, None)
        if old_group_id is not None:
            del self._groups[old_group_id].members[member_id]
            touched.append(old_group_id)
        if placement is not None:
            group_key, contribution = placement
            group_id = key_id(group_key)
            group = self._groups.setdefault(group_id, Group(key=group_key))
            group.members[member_id] = Membership(group_id, key_order(record.key), contribution)
            self._member_of[member_id] = group_id
            if group_id not in touched:
                touched.append(group_id)
        return [self._emit(self._groups[group_id], record.ts) for group_id in touched]

    def _emit(self, group: Group, ts: int) -> Item:
        group.ts = ts if group.ts is None else max(ts, group.ts)
        return {"key": group.key, "value": self._aggregate(group), "ts": group.ts}
