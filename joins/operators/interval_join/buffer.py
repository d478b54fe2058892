"""The join's buffers as Delta state: what a batch reads and writes of them, and compaction.

A batch must not cost what the buffers hold, so nothing here rewrites them per batch. One state
table, `buffer` (append, partitioned by `_side`), holds two kinds of entries (`_entry`):

- `row`: a row when it is buffered: its side's columns, `_seq` (its identity), `_batch` /
  `_pos` (buffer order) and `_used0` (did it join in the batch that buffered it);
- `used`: `_seq` of a buffered row that joined in a later batch: the unused flag of seed 003's
  fault tolerance, flipped without rewriting the row.

Eviction writes nothing: a row is buffered while every bounded time is at or above its lower
bound, and the lower bounds are carried from batch to batch (`timeline.py`). Evicted rows stay
in the files until compaction, and every read filters them out (the filter is on the time
columns, so Parquet statistics skip old files). A batch writes its new rows and flags in one
commit.

Compaction (`compact`, every `COMPACT_EVERY` batches after the done record) rewrites the table
with only the live rows, the `used` flags folded into `_used0`, clustered by time: the content a
batch reads is unchanged.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from joins import lake
from joins.incremental import StateTable
from joins.operators.interval_join.classify import BATCH, BUFFERED, CLASS, EVICT, POS, USED0, live
from joins.operators.interval_join.columns import SEQ, JoinLayout
from joins.operators.interval_join.pairs import BROADCAST_MAX_ROWS, distinct_ids, lin
from joins.sql import SIDES, ColumnRef, Side

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.incremental import JoinRoot, StepContext
    from joins.operators.interval_join.counts import BatchCounts

BUFFER = "buffer"
SIDE, ENTRY = "_side", "_entry"
ROW, USED = "row", "used"
STATE_TABLES = (StateTable(BUFFER, "append", partition_by=(SIDE,)),)
# Compaction writes about this many rows per file, clustered by time.
ROWS_PER_FILE = 500_000


def buffer_columns(layout: JoinLayout, side: Side) -> list[str]:
    return [*layout.sides[side].output_names(), SEQ, BATCH, POS, USED0]


def _entries(ctx_rows: DataFrame | None, side: Side, entry: str) -> DataFrame | None:
    from pyspark.sql import functions as F

    if ctx_rows is None:
        return None
    return ctx_rows.where((F.col(SIDE) == F.lit(side)) & (F.col(ENTRY) == F.lit(entry)))


def read_entries(ctx: StepContext) -> DataFrame | None:
    """The buffer as the batch starts from it (read once: every read below filters it)."""
    return ctx.state(BUFFER)


def buffered_rows(table: DataFrame | None, layout: JoinLayout, side: Side,
                  floors: dict[ColumnRef, int]) -> DataFrame | None:
    """The rows of `side` buffered when the batch starts (live under the carried bounds)."""
    rows = _entries(table, side, ROW)
    if rows is None:
        return None
    return rows.select(*buffer_columns(layout, side)).where(live(layout, side, floors))


def used_seqs(table: DataFrame | None, side: Side) -> DataFrame | None:
    """`_seq` of the rows of `side` that joined after the batch that buffered them."""
    used = _entries(table, side, USED)
    return None if used is None else used.select(SEQ)


def row_entries(layout: JoinLayout, side: Side, rows: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return rows.select(*buffer_columns(layout, side), F.lit(ROW).alias(ENTRY),
                       F.lit(side).alias(SIDE))


def used_entries(side: Side, seqs: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return seqs.select(F.col(SEQ).cast("long").alias(SEQ), F.lit(USED).alias(ENTRY),
                       F.lit(side).alias(SIDE))


def batch_entries(layout: JoinLayout, new: dict[Side, DataFrame], pairs: DataFrame | None,
                  old: dict[Side, DataFrame | None], counts: BatchCounts) -> DataFrame | None:
    """The batch's buffered rows (with their flag) and the flags of old rows that joined, for
    its one commit; None when the batch buffers nothing and no old row joined."""
    from pyspark.sql import functions as F

    # Empty rows of both sides first: the table's columns never depend on the first batch.
    parts = [row_entries(layout, side, new[side].withColumn(USED0, F.lit(False)).limit(0))
             for side in SIDES]
    writes = 0
    for side in SIDES:
        if counts.of(side, BUFFERED):
            writes += 1
            rows = new[side].where((F.col(CLASS) == BUFFERED) & F.col(EVICT).isNull())
            if pairs is None:
                rows = rows.withColumn(USED0, F.lit(False))
            else:
                # The batch's own rows that joined: at most its row count.
                flags = (pairs.where(~F.col(lin(side, "_old")))
                         .select(F.col(lin(side, SEQ)).alias("_hit")))
                flags = distinct_ids(flags, shipped=counts.rows(side) <= BROADCAST_MAX_ROWS)
                rows = (rows.join(flags, F.col(SEQ) == F.col("_hit"), "left")
                        .withColumn(USED0, F.col("_hit").isNotNull()))
            parts.append(row_entries(layout, side, rows))
        if old[side] is not None and pairs is not None:
            writes += 1
            hit = pairs.where(F.col(lin(side, "_old")) & F.col(lin(side, EVICT)).isNull())
            # Duplicates (a row joining several) are harmless; compaction folds them.
            parts.append(used_entries(side, hit.select(F.col(lin(side, SEQ)).alias(SEQ))))
    return entries(parts) if writes else None


def entries(parts: list[DataFrame]) -> DataFrame:
    """One frame of entries (each side's columns null elsewhere) for the batch's one commit."""
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    return union


def _first_time(layout: JoinLayout, side: Side) -> Column | None:
    from pyspark.sql import functions as F

    firsts = layout.bounded_columns(side) or layout.time_columns(side)
    return F.col(layout.ref(firsts[0])) if firsts else None


def compact(spark: SparkSession, root: JoinRoot, layout: JoinLayout,
            floors: dict[ColumnRef, int]) -> None:
    """Rewrite the buffer with its live rows, flags folded in, clustered by time. Guarded by
    the version it read: a batch committing meanwhile wins and the next compaction retries."""
    from pyspark.sql import functions as F

    path = root.state(BUFFER)
    version = lake.delta_version(path)
    if version is None:
        return
    table = lake.read_delta(spark, path, version=version)
    parts = []
    for side in SIDES:
        rows = table.where((F.col(SIDE) == side) & (F.col(ENTRY) == ROW))
        rows = rows.where(live(layout, side, floors))
        flags = (table.where((F.col(SIDE) == side) & (F.col(ENTRY) == USED))
                 .select(F.col(SEQ).alias("_flag")).distinct())
        rows = (rows.join(flags, rows[SEQ] == flags["_flag"], "left")
                .withColumn(USED0, F.col(USED0) | F.col("_flag").isNotNull()).drop("_flag"))
        first = _first_time(layout, side)
        n = rows.count()
        if first is not None and n:
            rows = rows.repartitionByRange(max(1, -(-n // ROWS_PER_FILE)), first)
        parts.append(rows)
    with contextlib.suppress(lake.ConcurrentCommitError):
        lake.write_delta(parts[0].unionByName(parts[1]), path, mode="overwrite",
                         partition_by=[SIDE], expected_version=version,
                         commit_message=f"interval_join: compact the buffer of version {version}")
