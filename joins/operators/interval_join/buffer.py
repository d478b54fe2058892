"""The join's buffers as Delta state: what a batch reads and writes of them, and compaction.

A batch must not cost what the buffers hold, so nothing here rewrites them per batch:

- `buffer_left` / `buffer_right` (append): a row when it is buffered, with `_used0` (did it join
  in the batch that buffered it), `_batch`, `_pos` (buffer order) and `_seq` (its identity);
- `used` (append): `(_side, _seq)` of a buffered row that joined in a later batch: the unused
  flag of seed 003's fault tolerance, flipped without rewriting the row;
- eviction writes nothing: a row is buffered while every bounded time is at or above its lower
  bound, and the lower bounds are carried from batch to batch (`timeline.py`). Evicted rows stay
  in the files until compaction, and every read filters them out (the filter is on the time
  columns, so Parquet statistics skip old files).

Compaction (`compact`, every `COMPACT_EVERY` batches after the done record) rewrites the buffers
with only their live rows and the `used` flags folded into `_used0`, then empties `used`: the
content a batch reads is unchanged.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from joins import lake
from joins.incremental import StateTable
from joins.operators.interval_join.classify import BATCH, POS, USED0, live
from joins.operators.interval_join.columns import SEQ, JoinLayout
from joins.sql import SIDES, ColumnRef, Side

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.incremental import JoinRoot, StepContext

BUFFER: dict[Side, str] = {"left": "buffer_left", "right": "buffer_right"}
USED = "used"
SIDE = "_side"
STATE_TABLES = (StateTable(BUFFER["left"], "append"), StateTable(BUFFER["right"], "append"),
                StateTable(USED, "append"))


def buffer_columns(layout: JoinLayout, side: Side) -> list[str]:
    return [*layout.sides[side].output_names(), SEQ, BATCH, POS, USED0]


def read_buffer(ctx: StepContext, layout: JoinLayout, side: Side,
                floors: dict[ColumnRef, int]) -> DataFrame | None:
    """The rows of `side` buffered when the batch starts (live under the carried bounds)."""
    rows = ctx.state(BUFFER[side], columns=buffer_columns(layout, side))
    return None if rows is None else rows.where(live(layout, side, floors))


def read_used(ctx: StepContext, side: Side) -> DataFrame | None:
    """`_seq` of the rows of `side` that joined after the batch that buffered them."""
    from pyspark.sql import functions as F

    used = ctx.state(USED)
    return None if used is None else used.where(F.col(SIDE) == F.lit(side)).select(SEQ)


def used_rows(side: Side, seqs: DataFrame, batch_id: int) -> DataFrame:
    from pyspark.sql import functions as F

    return seqs.select(F.lit(side).alias(SIDE), F.col(SEQ).cast("long").alias(SEQ),
                       F.lit(batch_id).cast("long").alias("batch_id"))


def compact(spark: SparkSession, root: JoinRoot, layout: JoinLayout,
            floors: dict[ColumnRef, int]) -> None:
    """Rewrite each buffer with its live rows, flags folded in; then empty `used`. Each rewrite
    is guarded by the version it read: a batch committing meanwhile wins and the next
    compaction retries."""
    from pyspark.sql import functions as F

    used_path = root.state(USED)
    used_version = lake.delta_version(used_path)
    used = None
    if used_version is not None:
        used = lake.read_delta(spark, used_path, version=used_version)
    folded = True
    for side in SIDES:
        path = root.state(BUFFER[side])
        version = lake.delta_version(path)
        if version is None:
            continue
        rows = lake.read_delta(spark, path, version=version).where(live(layout, side, floors))
        if used is not None:
            flags = (used.where(F.col(SIDE) == F.lit(side)).select(F.col(SEQ).alias("_flag"))
                     .distinct())
            rows = (rows.join(flags, rows[SEQ] == flags["_flag"], "left")
                    .withColumn(USED0, F.col(USED0) | F.col("_flag").isNotNull()).drop("_flag"))
        try:
            lake.write_delta(rows, path, mode="overwrite", expected_version=version,
                             commit_message=f"interval_join: compact {BUFFER[side]} of version "
                                            f"{version}")
        except lake.ConcurrentCommitError:
            folded = False
    # The flags may go only once every buffer holds them.
    if folded and used is not None and used_version is not None:
        with contextlib.suppress(lake.ConcurrentCommitError):
            lake.write_delta(used.limit(0), used_path, mode="overwrite",
                             expected_version=used_version,
                             commit_message="interval_join: used flags folded into the buffers")
