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

from pydantic import Field, StrictBool, StrictInt, model_validator

from joins.errors import ConfigError
from joins.operators.table_filter.spec import TableKey
from joins.spec import Record, Spec, parse_record

OPERATOR = "table_table_join"

JoinType = Literal["inner", "left", "outer"]
Side = Literal["left", "right"]


class TableSideSpec(Spec):
    """How one input table is materialised: a versioned store (timestamp semantics) or an
    unversioned one (arrival semantics)."""

    versioned: StrictBool
    history_retention_ms: StrictInt | None = Field(default=None, ge=0)

    @property
    def retention_ms(self) -> int:
        """History retention for `make_store` (unused by an unversioned store)."""
        return self.history_retention_ms or 0


class TableTableJoinSpec(Spec):
    join: JoinType
    left: TableSideSpec
    right: TableSideSpec

    @model_validator(mode="after")
    def _retention_matches_versioning(self) -> TableTableJoinSpec:
        # Checked here rather than in TableSideSpec so that the message names the side.
        for name, side in (("left", self.left), ("right", self.right)):
            if side.versioned and side.history_retention_ms is None:
                raise ConfigError(f"{OPERATOR}: invalid config: config.{name}.history_retention_ms: "
                                  f"required when {name}.versioned is true (how much history the "
                                  f"versioned table keeps)")
            if not side.versioned and side.history_retention_ms is not None:
                raise ConfigError(f"{OPERATOR}: invalid config: config.{name}.history_retention_ms: "
                                  f"only meaningful for a versioned table ({name}.versioned is "
                                  f"false); remove it or set {name}.versioned to true")
        return self

    def side(self, name: Side) -> TableSideSpec:
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
