"""Column roles of the Spark foreign-key join: its two changelog inputs, its state tables and
its output.

Inputs are changelogs (`joins.changelog.ChangelogColumns`: key, value columns, `ts`,
`tombstone`, `_seq` arrival order), as the `changelog` ingest writes them. The left input also
holds the foreign key: a value column (`foreign_key`) of the right key's type, null for a null
foreign key. (A replay lands a scenario's JSON values as text plus the foreign key extracted by
`FkJoinSpec.extract_foreign_key`, as an ingest with a declared schema would.)

Output, the join's changelog (the table-table join's shape): the left key, `left_<v>` and
`right_<v>` per value column, `has_left` / `has_right`, `ts`, `tombstone` (the key's result no
longer exists), `event_date`, `_batch_id`, `_emit_seq` (the arrival index of the update whose
response emitted the row).

State (append-only logs read as "latest per key", `joins.changelog.keyed`):

    lhs            the left table: per left key its current value, `_fk`, `_hash` (of the
                   value, what a subscription carries), `_ts`, `_present`, `_latest_ts`
    rhs            the right table: per right key its current value, `_ts`, `_present`,
                   `_latest_ts`
    subscriptions  KIP-213's subscription store: (`_fk`, `_pk`) -> `_hash`, `_ts`, `_live`
"""

from __future__ import annotations

from dataclasses import dataclass

from joins.changelog.columns import TwoTableColumns

# The result's vocabulary is shared with the table-table join (joins/changelog/result.py); this
# join's modules name it from here.
from joins.changelog.result import BATCH_ID as BATCH_ID
from joins.changelog.result import EMIT_SEQ as EMIT_SEQ
from joins.changelog.result import EVENT_DATE as EVENT_DATE
from joins.changelog.result import HISTORY as HISTORY
from joins.changelog.result import SIDES as SIDES
from joins.changelog.result import TOMBSTONE as TOMBSTONE
from joins.changelog.result import TS as TS
from joins.changelog.result import Side as Side
from joins.changelog.result import has as has

OPERATOR = "fk_join (spark)"
APP = "fk_join"
LHS, RHS, SUBSCRIPTIONS = "lhs", "rhs", "subscriptions"


# Bookkeeping columns of the state tables (underscored: never a user's value column).
S_TS, S_PRESENT, S_LATEST, S_FK, S_HASH = "_ts", "_present", "_latest_ts", "_fk", "_hash"
S_PK, S_LIVE = "_pk", "_live"

__all__ = ["BATCH_ID", "EMIT_SEQ", "EVENT_DATE", "TOMBSTONE", "TS", "FkColumns", "has"]


@dataclass(frozen=True)
class FkColumns(TwoTableColumns):
    """Which columns of each changelog are which role, and the foreign-key column of the left."""

    foreign_key: str = "fk"

    def left_input_columns(self) -> list[str]:
        """What the step reads of the left changelog (the FK may also be a value column)."""
        cols = [*self.left.bookkeeping(), *self.left_values]
        return cols if self.foreign_key in cols else [*cols, self.foreign_key]

    def out(self, side: Side, column: str) -> str:
        """A side's value column in the output (and the history)."""
        return f"{side}_{column}"

    def out_values(self, side: Side) -> list[str]:
        return [self.out(side, c) for c in self.values(side)]
