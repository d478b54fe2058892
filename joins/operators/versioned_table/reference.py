"""The `versioned_table` reference processor: a `VersionedStore` driven one op at a time.

Seeds 000 and 002 (KIP-889/914): a versioned table keeps, per key, the versions of its value
with the event time each became valid. The rules this operator pins (see
`joins.core.store.VersionedStore`):

- stream time is store-wide: the largest ts ever put, for any key;
- a put older than stream time minus history retention is not stored (`"expired"`); a put at
  exactly that bound is stored;
- a put with the same ts as a stored version replaces it (value <-> tombstone too); an equal ts
  with the latest version counts as latest, not as out of order;
- `get(key, as_of)` reads the version with the largest valid_from <= as_of; a tombstone reads as
  null; an `as_of` older than stream time minus history retention reads null, except that the
  latest version never expires (it answers whenever its ts <= as_of);
- an empty string is a value, never a tombstone;
- keys are equal by value and JSON type (`joins.core.keys`): 1 and 1.0 are two keys.
"""

from __future__ import annotations

from joins.core.operator import Item
from joins.core.store import VersionedStore
from joins.operators.versioned_table.spec import GetOp, PutOp, VersionedTableOp, VersionedTableSpec


class VersionedTableProcessor:
    """One item per op: `{"put": "latest" | {"valid_to": T} | "expired"}` or
    `{"get": null | {"value", "valid_from", "valid_to"}}`."""

    def __init__(self, spec: VersionedTableSpec) -> None:
        self.store = VersionedStore(spec.history_retention_ms)
        # Puts the store refused. Each is also reported as its own `"expired"` item; the counter
        # lets a long replay say how many without reading every item.
        self.metrics: dict[str, int] = {"put_expired": 0}

    def process(self, record: VersionedTableOp) -> list[Item]:
        if isinstance(record, PutOp):
            result = self.store.put(record.key, record.value, record.ts)
            if result.outcome == "expired":
                self.metrics["put_expired"] += 1
            return [{"put": result.as_item()}]
        assert isinstance(record, GetOp)
        found = self.store.get(record.key, record.as_of)
        if found is None:
            return [{"get": None}]
        return [{"get": {"value": found.value, "valid_from": found.valid_from,
                         "valid_to": found.valid_to}}]
