"""What one micro-batch of the Spark table-table join reports: the counters every join of two
changelog tables reports (`joins.changelog.report`) and its own."""

from __future__ import annotations

from dataclasses import dataclass

from joins.changelog.report import ChangelogJoinReport


@dataclass(frozen=True)
class TableTableReport(ChangelogJoinReport):
    """`tombstones_out`: results that say a key's result no longer exists; `keys_changed`: keys
    whose result the batch changed."""

    tombstones_out: int = 0
    keys_changed: int = 0
