"""Configuration and input records of the `fk_join` operator (seed 004, KIP-213; seed 000 for
versioned sides).

Config (see FORMAT.md):

- `join`: `inner` | `left`. A foreign-key join has no outer form: a right row that no left row
  references has no primary key to be emitted under.
- `foreign_key`: the field of the left value that holds the right table's key; a dotted path
  (`"customer.id"`) reaches into nested objects.
- `left`, `right`: `{"versioned": bool, "history_retention_ms": int}`; the retention is required
  for a versioned side and refused for an unversioned one (it would mean nothing).

Input records: `{"i", "side": "left" | "right", "key", "value", "ts"}`. A null value is a
tombstone. A left value must be an object (or null); how its foreign key is read is documented on
`FkJoinSpec.extract_foreign_key`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, StrictStr, field_validator, model_validator

from joins.core.keys import TableKey
from joins.core.versioned import VersionedInput
from joins.errors import InputRecordError
from joins.spec import Record, Spec, parse_record

OPERATOR = "fk_join"

JoinType = Literal["inner", "left"]
Side = Literal["left", "right"]


class FkJoinSpec(Spec):
    join: JoinType
    foreign_key: StrictStr = Field(min_length=1)
    left: VersionedInput
    right: VersionedInput

    @field_validator("foreign_key")
    @classmethod
    def _path_has_no_empty_segment(cls, value: str) -> str:
        if any(segment == "" for segment in value.split(".")):
            raise ValueError("must be a field name or a dotted path such as 'customer.id' "
                             "(no empty segment)")
        return value

    @model_validator(mode="after")
    def _retention_matches_versioning(self) -> FkJoinSpec:
        self.left.check(OPERATOR, "left.")
        self.right.check(OPERATOR, "right.")
        return self

    @property
    def foreign_key_path(self) -> tuple[str, ...]:
        return tuple(self.foreign_key.split("."))

    def extract_foreign_key(self, left_value: dict[str, Any], *, index: int | None = None) -> Any:
        """The right-table key a left value references; None = a null foreign key.

        A field missing at any level of the path reads as a null foreign key (the row joins
        nothing: no result in an inner join, `[left, null]` in a left join). A path that runs
        into a value that is not an object, or a foreign key that is a list, is an input error:
        that is a malformed row, not an absent reference.
        """
        current: Any = left_value
        for depth, segment in enumerate(self.foreign_key_path):
            if not isinstance(current, dict):
                where = ".".join(("value", *self.foreign_key_path[:depth]))
                raise InputRecordError(
                    f"must be an object holding {segment!r} (config.foreign_key is "
                    f"{self.foreign_key!r}), got {type(current).__name__}",
                    index=index, field=where, record=left_value, source=f"{OPERATOR} input")
            if segment not in current:
                return None
            current = current[segment]
        if isinstance(current, list):
            raise InputRecordError(
                "a foreign key must be a JSON scalar or object (a right-table key), got a list",
                index=index, field=".".join(("value", *self.foreign_key_path)),
                record=left_value, source=f"{OPERATOR} input")
        return current


class FkJoinRecord(Record):
    """`{"i", "side", "key", "value", "ts"}`. The key must not be null (a table row needs a
    primary key); the value is required but may be null (a tombstone)."""

    i: StrictInt
    side: Side
    key: TableKey = Field(...)
    value: Any = Field(...)
    ts: StrictInt


def parse_fk_record(raw: Any, index: int) -> FkJoinRecord:
    """Validate one input record. A left value that is neither an object nor null cannot hold a
    foreign key and is refused here, before it reaches the processor."""
    record = parse_record(FkJoinRecord, raw, index=index, operator=OPERATOR)
    if record.side == "left" and record.value is not None and not isinstance(record.value, dict):
        raise InputRecordError(
            f"a left value must be an object holding the foreign-key field (or null, a "
            f"tombstone), got {type(record.value).__name__}",
            index=index, field="value", record=raw, source=f"{OPERATOR} input")
    return record


def batch_phase(_record: FkJoinRecord) -> int:
    """The micro-batch rule for a table-table join: one phase, each side's updates applied in
    arrival order."""
    return 0
