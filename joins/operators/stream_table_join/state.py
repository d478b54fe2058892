"""Where the incremental stream-table join keeps its tables (the runtime's layout, see
`joins.incremental.layout`, plus this operator's two state tables).

- `buffer`: the grace buffer (stream records waiting for stream time to pass them by grace),
  rewritten whole by each batch that changes it;
- `unversioned_table`: the keyed state of an unversioned table (last arrival per key wins), an
  append-only log read as "largest arrival per key", compacted every `COMPACT_EVERY` batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from joins.incremental.layout import JoinRoot

APP = "stream_table_join"
BUFFER = "buffer"
UNVERSIONED_TABLE = "unversioned_table"


@dataclass(frozen=True)
class JoinPaths(JoinRoot):
    """The Delta tables of one incremental stream-table join, all under `root`."""

    @property
    def buffer(self) -> str:
        return self.state(BUFFER)

    @property
    def unversioned_table(self) -> str:
        return self.state(UNVERSIONED_TABLE)
