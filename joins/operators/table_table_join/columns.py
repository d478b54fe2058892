"""Column roles of the Spark table-table join: its two changelog inputs and its own tables.

Inputs (`joins.changelog.ChangelogColumns`): key, value columns, `ts`, `tombstone`, `_seq`
(arrival order). Output (the join's changelog, partitioned by event day): the key, each side's
value columns prefixed `left_` / `right_`, `has_left` / `has_right` (which sides the result
holds: a side's value columns may all be null in a present value), `ts`, `tombstone` (true: the
key's result no longer exists), `event_date`, and lineage (`_batch_id`, `_emit_seq`: the
arrival index of the update that emitted the row). State (`current`, one row per key per batch
that changed it): per side the current value, `<side>_present`, `<side>_ts` (the current
value's ts) and `<side>_latest_ts` (a versioned side's latest stored ts, tombstones included:
what decides "out of order").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from joins.changelog import ChangelogColumns

OPERATOR = "table_table_join (spark)"
APP = "table_table_join"
CURRENT = "current"
HISTORY = "history"

Side = Literal["left", "right"]
SIDES: tuple[Side, Side] = ("left", "right")

TS, TOMBSTONE, EVENT_DATE = "ts", "tombstone", "event_date"
BATCH_ID, EMIT_SEQ = "_batch_id", "_emit_seq"
VALID_FROM, VALID_TO = "valid_from", "valid_to"


def has(side: Side) -> str:
    return f"has_{side}"


def present(side: Side) -> str:
    return f"{side}_present"


def side_ts(side: Side) -> str:
    return f"{side}_ts"


def latest_ts(side: Side) -> str:
    return f"{side}_latest_ts"


@dataclass(frozen=True)
class TableTableColumns:
    """Which columns of each input are which role, and the value columns of each side."""

    left: ChangelogColumns = field(default_factory=ChangelogColumns)
    right: ChangelogColumns = field(default_factory=ChangelogColumns)
    left_values: tuple[str, ...] = ("value",)
    right_values: tuple[str, ...] = ("value",)

    @property
    def key(self) -> str:
        """The key column of the join's own tables (the left input's name for it)."""
        return self.left.key

    def changelog(self, side: Side) -> ChangelogColumns:
        return self.left if side == "left" else self.right

    def values(self, side: Side) -> tuple[str, ...]:
        return self.left_values if side == "left" else self.right_values

    def out(self, side: Side, column: str) -> str:
        """The name of a side's value column in the output and the state."""
        return f"{side}_{column}"

    def out_values(self, side: Side) -> list[str]:
        return [self.out(side, c) for c in self.values(side)]
