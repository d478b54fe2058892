"""A user's Delta table as a changelog source: the commits (from_version, to_version] as typed
cells, checked like any landing file's rows (joins.landing.checks).

A table with the change data feed is read as a changelog: inserts and the new state of updated
rows are puts, deletes become tombstones, update pre-images are ignored. A delete has no event
time of its own in the table: it takes its commit's time (when the row stopped being valid),
as a tombstone produced by a CDC connector would. Without the feed the table is read from its
appends; a commit that removed rows is refused, naming the version (`joins.lake.read_changes`).

Rows are numbered per commit. Appends keep their files' order; the feed keeps none within a
commit, so its rows are numbered by key and event time (one commit changes a key once, unless
the table holds duplicate keys). A row's source is `<table>@v<version>`, its source row its
1-based place in that commit, its arrival (version, place) packed into a long.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.landing.parquet import typed_cells
from joins.landing.spec import LandingSpec
from joins.versioned.quarantine import SOURCE_FILE, SOURCE_ROW
from joins.versioned.spark_store import ARRIVAL

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_APPEND_ORDER = "_tj_append_order"
# Arrival = (commit's place in the batch << 40) | row's place in its commit (as joins.lake does).
_ROW_BITS = 40


def delta_cells(spark: SparkSession, table: str, from_version: int, to_version: int,
                spec: LandingSpec) -> DataFrame:
    """Typed cells (as `typed_cells` gives them, with SOURCE_FILE, SOURCE_ROW, ARRIVAL) of the
    changes the commits in (from_version, to_version] made to `table`."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from joins import lake
    from joins.lake.feed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, DELETE

    first = from_version + 1
    if lake.change_feed_enabled(table, first):
        frame = lake.read_change_feed(spark, table, from_version, to_version)
        version: Column = F.col(COMMIT_VERSION)
        order: list[Column] = [F.col(k) for k in spec.key_names if k in frame.columns]
        if spec.ts_column in frame.columns:
            order.append(F.col(spec.ts_column))
        deleted: Column = F.col(CHANGE_TYPE) == F.lit(DELETE)
        deleted_at: Column = F.unix_millis(F.col(COMMIT_TIMESTAMP))
        columns = [c for c in frame.columns if c not in (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)]
    else:
        frame = lake.read_changes(spark, table, from_version, to_version,
                                  arrival_column=_APPEND_ORDER)
        version = F.shiftright(F.col(_APPEND_ORDER), 40)
        order = [F.col(_APPEND_ORDER)]
        deleted = F.lit(False)
        deleted_at = F.lit(None).cast("long")
        columns = [c for c in frame.columns if c != _APPEND_ORDER]

    fields = {f.name: f.dataType for f in frame.schema.fields}
    ts = spec.ts_column
    if isinstance(fields.get(ts), (T.TimestampType, T.TimestampNTZType)):
        # A TIMESTAMP event time is the project's epoch milliseconds (UTC).
        frame = frame.withColumn(ts, F.unix_millis(F.col(ts).cast("timestamp")))
    if ts in fields:
        frame = frame.withColumn(ts, F.when(deleted, deleted_at).otherwise(F.col(ts)))
    if spec.tombstone_column is not None and spec.tombstone_column in fields:
        flag = spec.tombstone_column
        frame = frame.withColumn(flag, deleted | F.coalesce(F.col(flag), F.lit(False)))
    elif spec.tombstone_column is None:
        # The null-value convention: a delete is the key with every value null.
        for name in spec.value_names:
            if name in fields:
                frame = frame.withColumn(name, F.when(deleted, F.lit(None)).otherwise(F.col(name)))
    place = F.row_number().over(Window.partitionBy(version).orderBy(*order)) - 1
    arrival = F.shiftleft(version - F.lit(first), _ROW_BITS) + place
    frame = frame.select(*(F.col(f"`{c}`") for c in columns),
                         F.concat(F.lit(f"{table}@v"), version.cast("string")).alias("_fp"),
                         arrival.alias("_ri"))
    schema = T.StructType([f for f in frame.schema.fields if f.name in columns])
    cells = typed_cells(frame, schema, spec)
    return cells.select(
        F.col("_fp").alias(SOURCE_FILE),
        (F.col("_ri").bitwiseAND(F.lit((1 << _ROW_BITS) - 1)) + 1).alias(SOURCE_ROW),
        F.col("_ri").alias(ARRIVAL),
        *(c for c in cells.columns if c not in ("_fp", "_ri")))
