"""Configuration and input records of the primary-key `table_table_join` (seed 000, KIP-914).

Config (see FORMAT.md):

- `join`: `inner` | `left` | `outer`.
- `left`, `right`: how each input table is materialised, `{"versioned": bool,
  "history_retention_ms": int}`. `history_retention_ms` is required for a versioned side and
  refused for an unversioned one (it would mean nothing). Versioning is decided per side.

Input: `{"i", "side": "left" | "right", "key", "value", "ts"}`; a null value is a tombstone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, model_validator

from joins.core.keys import TableKey
from joins.core.versioned import VersionedInput
from joins.spec import Record, Spec, parse_record

OPERATOR = "table_table_join"

JoinType = Literal["inner", "left", "outer"]
Side = Literal["left", "right"]


class TableTableJoinSpec(Spec):
    join: JoinType
    left: VersionedInput
    right: VersionedInput

    @model_validator(mode="after")
    def _retention_matches_versioning(self) -> TableTableJoinSpec:
        self.left.check(OPERATOR, "left.")
        self.right.check(OPERATOR, "right.")
        return self

    def side(self, name: Side) -> VersionedInput:
        return self.left if name == "left" else self.right


class TableTableJoinRecord(Record):
    """One update of the left or the right input table."""

    i: StrictInt
    side: Side
    key: TableKey = Field(...)
    # Required even when null, so that a forgotten value never turns silently into a delete.
    value: Any = Field(...)
    ts: StrictInt


def parse_table_table_join_record(raw: Any, index: int) -> TableTableJoinRecord:
    return parse_record(TableTableJoinRecord, raw, index=index, operator=OPERATOR)
