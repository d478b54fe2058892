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

from dataclasses import dataclass

from joins.changelog.columns import TwoTableColumns

# The result's vocabulary is shared with the foreign-key join (joins/changelog/result.py); this
# join's modules name it from here.
from joins.changelog.result import BATCH_ID as BATCH_ID
from joins.changelog.result import EMIT_SEQ as EMIT_SEQ
from joins.changelog.result import EVENT_DATE as EVENT_DATE
from joins.changelog.result import HISTORY as HISTORY
from joins.changelog.result import SIDES as SIDES
from joins.changelog.result import TOMBSTONE as TOMBSTONE
from joins.changelog.result import TS as TS
from joins.changelog.result import VALID_FROM as VALID_FROM
from joins.changelog.result import VALID_TO as VALID_TO
from joins.changelog.result import Side as Side
from joins.changelog.result import has as has

OPERATOR = "table_table_join (spark)"
APP = "table_table_join"
CURRENT = "current"


def present(side: Side) -> str:
    return f"{side}_present"


def side_ts(side: Side) -> str:
    return f"{side}_ts"


def latest_ts(side: Side) -> str:
    return f"{side}_latest_ts"


@dataclass(frozen=True)
class TableTableColumns(TwoTableColumns):
    """Which columns of each input are which role, and the value columns of each side."""

    def out(self, side: Side, column: str) -> str:
        """The name of a side's value column in the output and the state."""
        return f"{side}_{column}"

    def out_values(self, side: Side) -> list[str]:
        return [self.out(side, c) for c in self.values(side)]
