"""Column roles of the incremental stream-table join: which columns of the stream source, the
table source and the join's own tables mean what.

The defaults are the lake conventions: a stream source has `key`, value columns, `ts` (event
time, int ms), `event_date` and `_seq` (arrival order); a versioned table source is the versions
table of `joins.operators.versioned_table` (`key`, value columns, `ts`, `tombstone`, `batch_id`,
`arrival`, ...); an unversioned table source is a changelog with `key`, value columns, `ts`,
`tombstone` and `arrival`. Table value columns appear in the output with a `table_` prefix, so
that a stream value column and a table value column of the same name never collide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.changelog.columns import column_names
from joins.changelog.columns import require as changelog_require
from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

OPERATOR = "stream_table_join (spark incremental)"

# Working and lineage columns the join adds. A leading underscore keeps them apart from data.
TABLE_KEY = "_tk"              # the table key a stream record looks up (working column)
EMIT_SEQ = "_emit_seq"         # arrival index of the stream record after which a row was emitted
LATE = "_late"                 # the row was joined late (late = join), not from the buffer
BATCH_ID = "_batch_id"         # micro-batch that wrote the row (null for a backfill)
REASON = "reason"              # quarantine reason
VALID_FROM = "table_valid_from"  # ts of the table version that answered (null: no match)
TABLE_PREFIX = "table_"

# Table-side columns that are bookkeeping, never values.
TABLE_BOOKKEEPING: frozenset[str] = frozenset(
    {"ts", "tombstone", "source_id", "batch_id", "arrival", "event_date", "_seq",
     "_change_type", "_commit_version", "_commit_timestamp", "source_file", "source_row"})


@dataclass(frozen=True)
class JoinColumns:
    """Column names; `None` value lists are inferred from the source schemas."""

    key: str = "key"
    ts: str = "ts"
    event_date: str = "event_date"
    seq: str = "_seq"
    stream_values: tuple[str, ...] | None = None
    # The stream column naming the table key; None = the spec's `table_key`, else the stream key.
    table_key_column: str | None = None
    table_key: str = "key"
    table_ts: str = "ts"
    tombstone: str = "tombstone"
    table_arrival: str = "arrival"
    table_values: tuple[str, ...] | None = None

    def stream_reserved(self) -> set[str]:
        return {self.key, self.ts, self.event_date, self.seq}

    def resolve_stream_values(self, stream: DataFrame | StructType) -> tuple[str, ...]:
        names = column_names(stream)
        if self.stream_values is not None:
            missing = [c for c in self.stream_values if c not in names]
            if missing:
                raise ConfigError(f"{OPERATOR}: stream source lacks value column(s) {missing} "
                                  f"(has {names})")
            return self.stream_values
        reserved = self.stream_reserved()
        return tuple(c for c in names
                     if c not in reserved and not c.startswith("_") and c not in TABLE_BOOKKEEPING)

    def lookup_key_column(self, spec: StreamTableJoinSpec) -> str:
        if self.table_key_column is not None:
            return self.table_key_column
        return spec.table_key if spec.table_key is not None else self.key

    def resolve_table_values(self, table: DataFrame | StructType) -> tuple[str, ...]:
        names = column_names(table)
        if self.table_values is not None:
            missing = [c for c in self.table_values if c not in names]
            if missing:
                raise ConfigError(f"{OPERATOR}: table source lacks value column(s) {missing} "
                                  f"(has {names})")
            return self.table_values
        reserved = {self.table_key, self.table_ts, self.tombstone, self.table_arrival}
        return tuple(c for c in names
                     if c not in reserved and c not in TABLE_BOOKKEEPING and not c.startswith("_"))


def require(rows: DataFrame | StructType, columns: list[str], *, what: str) -> None:
    changelog_require(rows, columns, who=OPERATOR, what=what)
