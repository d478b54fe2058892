"""Stream time per record of a changelog batch, in arrival order, at batch scale.

A record's stream time is the largest ts of the table and of every earlier record of the
batch. The running max is a two-pass prefix scan: arrival indices are cut into contiguous
blocks, each block's max ts is collected (one number per block), the carry into each block is
the max of the blocks before it, and a window partitioned by block finishes the job. No
single-partition window, no collect of records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.spark.local_rows import local_rows
from joins.versioned.spark_store import ARRIVAL, TS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, WindowSpec

STREAM_TIME = "_stream_time"
DUPLICATE_ARRIVAL = "_duplicate_arrival"

DEFAULT_BLOCK_ROWS = 1 << 20
# The prefix scan collects one number per block; wide arrival ranges widen blocks instead.
MAX_BLOCKS = 4096


def with_stream_time(changelog: DataFrame, *, stream_time_before: int | None,
                     ts_col: str = TS, arrival_col: str = ARRIVAL,
                     block_rows: int = DEFAULT_BLOCK_ROWS,
                     rows_at_most: int | None = None) -> DataFrame:
    """Adds `_stream_time`: the stream time each record sees, i.e. the max of
    `stream_time_before` and the ts of every record with a smaller arrival index (null while
    nothing was stored yet), and `_duplicate_arrival`: true on the second and later records of
    an arrival index (arrival order must be total).

    rows_at_most: a bound on the changelog's records the caller knows without a job (rows it
    built itself); at most `block_rows` makes one block with no job to find the arrivals' span.
    A bound below the true count costs only speed (one block holds every record), never an
    answer."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if block_rows < 1:
        raise ValueError(f"block_rows must be >= 1, got {block_rows}")
    spark = changelog.sparkSession
    arrival = F.col(arrival_col)
    quoted = "`" + arrival_col.replace("`", "``") + "`"
    in_block = Window.partitionBy("_block").orderBy(arrival_col)
    if rows_at_most is not None and rows_at_most <= block_rows:
        # No more records than one block holds, whatever their arrival indices. The span job
        # this skips was a fifth of a small ingest's time.
        one = changelog.withColumn("_block", F.expr(f"CASE WHEN {quoted} IS NOT NULL THEN 0L END"))
        return _finish(_carry_before(one, stream_time_before), in_block, ts_col, arrival_col)
    span = changelog.agg(F.min(arrival).alias("lo"), F.max(arrival).alias("hi")).first()
    if span is None or span["lo"] is None:
        return (changelog.withColumn(STREAM_TIME, F.lit(stream_time_before).cast("long"))
                .withColumn(DUPLICATE_ARRIVAL, F.lit(False)))
    lo, hi = int(span["lo"]), int(span["hi"])
    # With unique arrivals a block holds at most `width` records; widen blocks rather than
    # collect more than MAX_BLOCKS maxima when arrival indices are sparse.
    width = max(block_rows, -(-(hi - lo + 1) // MAX_BLOCKS))
    # Integer division: exact for any long arrival index (a double would round above 2**53).
    blocked = changelog.withColumn("_block", F.expr(f"({quoted} - {lo}L) div {width}L"))
    if hi - lo < width:
        # One block (every micro-batch below a million records): nothing is carried into it
        # but the table's own stream time, so the pass collecting block maxima is not needed.
        return _finish(_carry_before(blocked, stream_time_before), in_block, ts_col, arrival_col)
    # A null arrival (an invalid record, refused later) has no block and carries nothing.
    maxima = sorted((int(r["_block"]), r["m"]) for r in
                    blocked.groupBy("_block").agg(F.max(ts_col).alias("m")).collect()
                    if r["_block"] is not None)
    carry_rows: list[tuple[int, int | None]] = []
    running = stream_time_before
    for blk, block_max in maxima:
        carry_rows.append((blk, running))
        if block_max is not None:
            running = int(block_max) if running is None else max(running, int(block_max))
    carries = local_rows(spark, carry_rows, "_block long, _carry long")
    return _finish(blocked.join(F.broadcast(carries), on="_block", how="left"), in_block,
                   ts_col, arrival_col)


def _carry_before(blocked: DataFrame, stream_time_before: int | None) -> DataFrame:
    """One block's carry: the table's own stream time (none for a record without a block)."""
    from pyspark.sql import functions as F

    return blocked.withColumn("_carry", F.when(F.col("_block").isNotNull(),
                                               F.lit(stream_time_before)).cast("long"))


def _finish(carried: DataFrame, in_block: WindowSpec, ts_col: str, arrival_col: str) -> DataFrame:
    """Stream time within a block: its carry and every earlier record of the block."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    arrival = F.col(arrival_col)
    before_in_block = F.max(ts_col).over(in_block.rowsBetween(Window.unboundedPreceding, -1))
    # greatest() skips nulls: null only when neither the table nor an earlier record has a ts.
    return (carried
            .withColumn(STREAM_TIME, F.greatest(F.col("_carry"), before_in_block))
            # Equal arrivals share a block, so the same window sees every duplicate.
            .withColumn(DUPLICATE_ARRIVAL,
                        F.coalesce(F.lag(arrival_col).over(in_block) == arrival, F.lit(False)))
            .drop("_block", "_carry"))
