"""Spark building blocks of the table-result operators (table-table join, table filter, table
aggregate) on the incremental runtime: changelog inputs, their versioning rules at batch scale,
and keyed state read by a batch's keys only.

    ChangelogColumns   which columns of a changelog input are the key, ts, tombstone flag and
                       arrival order (`columns.py`)
    side_clock         a side's stream time before / after a batch and whether any of the
                       batch's updates can be beyond history retention (`expiry.py`;
                       `stream_time_key`: where the batch carries it to the next)
    mark_expired       the updates a versioned store refuses (ts < stream time - retention),
                       decided in arrival order across the whole batch (`expiry.py`)
    both_sides         both of the above for each side of a two-sided table join
    keyed_state        the current state of the batch's keys only (`keyed.py`)
"""

from joins.changelog.columns import ChangelogColumns, require
from joins.changelog.expiry import (
    EXPIRED,
    ST_BEFORE,
    SideClock,
    both_sides,
    expired_reason,
    expired_rows,
    mark_expired,
    side_clock,
    stream_time_key,
)
from joins.changelog.keyed import STATE_BATCH, compact_keyed_state, keyed_state

__all__ = [
    "EXPIRED",
    "STATE_BATCH",
    "ST_BEFORE",
    "ChangelogColumns",
    "SideClock",
    "both_sides",
    "compact_keyed_state",
    "expired_reason",
    "expired_rows",
    "keyed_state",
    "mark_expired",
    "require",
    "side_clock",
    "stream_time_key",
]
