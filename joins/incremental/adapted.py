"""An input that is a Delta table a user names, in its own layout.

The project's ingest writes tables in the lake's layout (`key`..., values, `ts` in epoch ms,
`event_date`, an arrival order). A table written by anyone else has its own column names, may
keep event time as a timestamp, and has no arrival column. `DeltaTableSource` reads it by
version like any input and hands the operator rows in the lake's layout:

- the key column(s) under `key_as` names (default: their own), the value columns as they are;
- `ts`: event time in epoch ms (a TIMESTAMP column is converted), `event_date` its UTC day;
- `_seq` / `arrival`: the row's place in the table's history, from the commit order (commit
  version, the file's place in its commit, the row's place in its file: exact, and the same
  whichever batch reads the row), `batch_id` its commit version;
- `tombstone`: the named boolean column, or false.

Such a table is read as a changelog: every row ever added is a record, so it must be
append-only (a commit that removed rows is refused by name). Its snapshot is therefore its
whole changelog, read from the log; a table whose early log entries were cleaned up cannot be
read from the start, and says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins import lake
from joins.errors import ConfigError
from joins.incremental.sources import Source
from joins.spark.exprs import event_date
from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

SEQ, ARRIVAL, BATCH_ID, TS, EVENT_DATE, TOMBSTONE = ("_seq", "arrival", "batch_id", "ts",
                                                     "event_date", "tombstone")
DERIVED = (TS, EVENT_DATE, SEQ, ARRIVAL, BATCH_ID, TOMBSTONE)
_VERSION_SHIFT = 40


@dataclass(frozen=True)
class DeltaTableSource(Source):
    """`path` read as a changelog with the given roles (see the module docstring)."""

    key: tuple[str, ...] = ()
    ts: str = "ts"
    values: tuple[str, ...] | None = None
    tombstone: str | None = None
    key_as: tuple[str, ...] | None = None

    def _check(self, schema: StructType) -> tuple[tuple[str, ...], tuple[str, ...]]:
        names = [n for n in schema.fieldNames() if n != SEQ]
        where = f"input table {self.path!r}"
        if not self.key:
            raise ConfigError(f"{where}: name its key column(s)")
        for role, col in [*(("key", k) for k in self.key), ("ts", self.ts),
                          *((("tombstone", self.tombstone),) if self.tombstone else ())]:
            if col not in names:
                raise ConfigError(f"{where}: the {role} column {col!r} is not in the table "
                                  f"(columns: {', '.join(names)})")
        ts_type = schema[self.ts].dataType.typeName()
        if ts_type not in ("long", "integer", "timestamp", "timestamp_ntz"):
            raise ConfigError(f"{where}: the ts column {self.ts!r} must be epoch ms (an integer) "
                              f"or a timestamp, got {ts_type}")
        taken = {SEQ, self.ts, *self.key, *((self.tombstone,) if self.tombstone else ())}
        values = self.values if self.values is not None else tuple(
            c for c in names if c not in taken)
        keys = self.key_as or self.key
        if len(keys) != len(self.key):
            raise ConfigError(f"{where}: key_as names {len(keys)} column(s) for {len(self.key)} key(s)")
        for col in values:
            if col not in names:
                raise ConfigError(f"{where}: the value column {col!r} is not in the table")
        clash = sorted({*keys, *values} & set(DERIVED))
        if clash:
            raise ConfigError(f"{where}: column(s) {clash} would clash with the columns the join "
                              f"adds ({', '.join(DERIVED)}); rename them with key_as or leave "
                              f"them out of values")
        return keys, values

    def _ts_ms(self, schema: StructType) -> Column:
        from pyspark.sql import functions as F

        col = F.col(self.ts)
        if schema[self.ts].dataType.typeName().startswith("timestamp"):
            return F.unix_millis(col.cast("timestamp"))
        return col.cast("long")

    def _adapt(self, raw: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        keys, values = self._check(raw.schema)
        ts = self._ts_ms(raw.schema)
        tomb = F.col(self.tombstone).cast("boolean") if self.tombstone else F.lit(False)
        return raw.select(
            *(F.col(k).alias(a) for k, a in zip(self.key, keys, strict=True)),
            *(F.col(v) for v in values),
            ts.alias(TS), event_date(ts).alias(EVENT_DATE),
            F.col(SEQ), F.col(SEQ).alias(ARRIVAL),
            F.shiftright(F.col(SEQ), _VERSION_SHIFT).alias(BATCH_ID),
            F.coalesce(tomb, F.lit(False)).alias(TOMBSTONE))

    def schema(self, spark: SparkSession, version: int) -> StructType:
        del version  # the latest schema: a table's columns only ever widen
        return self._adapt(local_rows(spark, [], self._raw_schema())).schema

    def _raw_schema(self) -> StructType:
        from pyspark.sql import types as T

        raw = lake.table_schema(self.path)
        return T.StructType([*raw.fields, T.StructField(SEQ, T.LongType())])

    def changes(self, spark: SparkSession, after: int, last: int) -> DataFrame:
        return self._adapt(lake.read_changes(spark, self.path, after, last, arrival_column=SEQ))

    def change_stats(self, after: int, last: int) -> lake.ChangeStats | None:
        return None  # statistics are of the table's own columns: the step computes its own

    def rows_of_days(self, spark: SparkSession, version: int, days: Sequence[dt.date]) -> DataFrame:
        from pyspark.sql import functions as F

        return self.snapshot(spark, version).where(F.col(EVENT_DATE).isin(list(days)))

    def snapshot(self, spark: SparkSession, version: int,
                 columns: Sequence[str] | None = None) -> DataFrame:
        rows = self.changes(spark, -1, version)
        return rows if columns is None else rows.select(*columns)
