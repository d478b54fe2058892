"""Column roles of a changelog input: one row per update of a table, in arrival order.

The lake convention (what the project's `changelog` ingest writes, and what a replay lands):
the key column(s), value columns, `ts` (event time, int ms), `tombstone` (true: a delete; the
value columns are then null), `_seq` (arrival order, unique per table). A user's own Delta
table can name other columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from joins.changelog.result import Side
from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class ChangelogColumns:
    key: str = "key"
    ts: str = "ts"
    tombstone: str = "tombstone"
    seq: str = "_seq"

    def bookkeeping(self) -> tuple[str, ...]:
        return (self.key, self.ts, self.tombstone, self.seq)


@dataclass(frozen=True)
class TwoTableColumns:
    """Which columns of each input of a join of two changelog tables are which role, and the
    value columns of each side."""

    left: ChangelogColumns = field(default_factory=ChangelogColumns)
    right: ChangelogColumns = field(default_factory=ChangelogColumns)
    left_values: tuple[str, ...] = ("value",)
    right_values: tuple[str, ...] = ("value",)

    @property
    def key(self) -> str:
        """The key column of the join's output and state (the left input's name for it)."""
        return self.left.key

    def changelog(self, side: Side) -> ChangelogColumns:
        return self.left if side == "left" else self.right

    def values(self, side: Side) -> tuple[str, ...]:
        return self.left_values if side == "left" else self.right_values


def checked_not_null(column: Column, what: str, *, operator: str, side: Side, key: Column,
                     seq: Column) -> Column:
    """`column`, or a failure naming the update when it is null (never dropped silently)."""
    from pyspark.sql import functions as F

    message = F.concat(F.lit(f"{operator}: the {side} input has an update with a null {what} "
                             f"(key "), F.coalesce(key.cast("string"), F.lit("null")),
                       F.lit(", arrival "), F.coalesce(seq.cast("string"), F.lit("null")),
                       F.lit("): a changelog update needs its key, ts, tombstone flag and "
                             "arrival index"))
    return F.when(column.isNull(), F.raise_error(message)).otherwise(column)


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
