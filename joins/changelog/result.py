"""The vocabulary of a two-sided table join's result (the table-table join, the foreign-key
join): its sides, the columns of its changelog output and of its temporal history.

Output: the key, each side's value columns, `has_left` / `has_right` (which sides the result
holds), `ts`, `tombstone` (the key's result no longer exists), `event_date` and lineage
(`_batch_id`, `_emit_seq`: the arrival index of the update that emitted the row). History:
the same result columns valid over `[valid_from, valid_to)` (`valid_to` null: still valid).
"""

from __future__ import annotations

from typing import Literal

Side = Literal["left", "right"]
SIDES: tuple[Side, Side] = ("left", "right")

TS, TOMBSTONE, EVENT_DATE = "ts", "tombstone", "event_date"
BATCH_ID, EMIT_SEQ = "_batch_id", "_emit_seq"
VALID_FROM, VALID_TO = "valid_from", "valid_to"
# The table backfills write: the temporal history of event days.
HISTORY = "history"


def has(side: Side) -> str:
    return f"has_{side}"
