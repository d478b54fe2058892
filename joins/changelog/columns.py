"""Column roles of a changelog input: one row per update of a table, in arrival order.

The lake convention (what the project's `changelog` ingest writes, and what a replay lands):
the key column(s), value columns, `ts` (event time, int ms), `tombstone` (true: a delete; the
value columns are then null), `_seq` (arrival order, unique per table). A user's own Delta
table can name other columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class ChangelogColumns:
    key: str = "key"
    ts: str = "ts"
    tombstone: str = "tombstone"
    seq: str = "_seq"

    def bookkeeping(self) -> tuple[str, ...]:
        return (self.key, self.ts, self.tombstone, self.seq)


def column_names(rows: DataFrame | StructType) -> list[str]:
    """The columns of a frame or of a schema. A schema is enough to check an input's columns:
    an empty frame made from it (`createDataFrame([], schema)`) costs a JVM plan, ~30 ms of a
    micro-batch."""
    from pyspark.sql.types import StructType

    return rows.fieldNames() if isinstance(rows, StructType) else rows.columns


def require(rows: DataFrame | StructType, columns: Sequence[str], *, who: str, what: str) -> None:
    """ConfigError naming the table and the missing columns."""
    names = column_names(rows)
    missing = [c for c in columns if c not in names]
    if missing:
        raise ConfigError(f"{who}: {what} lacks column(s) {', '.join(map(repr, missing))} "
                          f"(has {', '.join(names)})")
