"""Prefix stream time of a batch: for each record, the largest eligible ts of every record
that arrived before it (and the stream time the batch starts from), computed distributed.

Arrival indices are cut into contiguous blocks, one max per block is collected (a few numbers),
the carry into each block is a tiny prefix on the driver, and a window partitioned by block
finishes it: no single-partition window over a whole batch. A batch known (from Delta
statistics) to fit one block skips the collect: its one window is small by definition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from joins.lake import ChangeStats

P_BEFORE = "_p_before"
BLOCK = "_block"
_CARRY = "_carry"
DEFAULT_BLOCK_ROWS = 1 << 16
MAX_BLOCKS = 256


@dataclass(frozen=True)
class Block:
    """One contiguous range of arrival indices: the stream time entering it (`carry`) and
    leaving it (`high`); None while no eligible record has been seen."""

    index: int
    carry: int | None
    high: int | None


@dataclass(frozen=True)
class PrefixScan:
    frame: DataFrame  # the input plus BLOCK and P_BEFORE
    blocks: tuple[Block, ...]
    stream_time_after: int | None
    single_block: bool = False  # blocks and stream_time_after are left to the caller


def max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


class Unknown:
    """What Delta statistics cannot tell (None is an answer: there is no such record)."""


def max_ts_if_no_nulls(stats: ChangeStats | None, *, ts: str, some_of: list[str],
                       all_of: list[str]) -> int | Unknown | None:
    """The largest `ts` of a batch's new rows from the Delta statistics of its files (no Spark
    job), if they show that every row has a `ts`, a value in at least one `some_of` column
    (when there are any) and in every `all_of` column."""
    if stats is None or stats.rows is None:
        return Unknown()
    if stats.rows == 0:
        return None
    no_null = {c for c, n in stats.nulls.items() if n == 0}
    high = stats.max.get(ts)
    if ts not in no_null or not isinstance(high, int) or isinstance(high, bool):
        return Unknown()
    if some_of and not no_null.intersection(some_of):
        return Unknown()
    if not no_null.issuperset(all_of):
        return Unknown()
    return high


def prefix_stream_time(df: DataFrame, *, ts_col: str, seq_col: str, stream_time_before: int | None,
                       block_rows: int = DEFAULT_BLOCK_ROWS,
                       seq_span: tuple[int, int] | None = None) -> PrefixScan:
    """Adds P_BEFORE: max(stream_time_before, `ts_col` of every row with a smaller `seq_col`).
    Null `ts_col` values are ignored (rows that are never put). `seq_col` must be unique.

    `seq_span` (the smallest and largest `seq_col`, e.g. from Delta statistics) lets a batch
    whose arrival indices fit one block skip the job that collects block maxima: its blocks
    and stream time after it are then unknown here (`blocks` empty, `stream_time_after` None)
    and come from the caller's first aggregate over the frame (`single_block`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if block_rows < 1:
        raise ValueError(f"block_rows must be >= 1, got {block_rows}")
    spark = df.sparkSession
    quoted = "`" + seq_col.replace("`", "``") + "`"
    before_in_block = F.max(ts_col).over(
        Window.partitionBy(BLOCK).orderBy(seq_col).rowsBetween(Window.unboundedPreceding, -1))
    if seq_span is not None and seq_span[1] - seq_span[0] < block_rows:
        frame = (df.withColumn(BLOCK, F.lit(0).cast("long"))
                 .withColumn(P_BEFORE, F.greatest(F.lit(stream_time_before).cast("long"),
                                                  before_in_block)))
        return PrefixScan(frame, (), None, single_block=True)

    def block_maxima(width: int, offset: int) -> list[Any]:
        blocked = df.withColumn(BLOCK, F.expr(f"({quoted} - {offset}L) div {width}L"))
        # One more than allowed tells "too many blocks" without collecting them all.
        return (blocked.groupBy(BLOCK).agg(F.max(ts_col).alias("m"))
                .limit(MAX_BLOCKS + 1).collect())

    # Dense arrival indices (the usual case) need one job: blocks of `block_rows` indices.
    width, offset = block_rows, 0
    rows = block_maxima(width, offset)
    if len(rows) > MAX_BLOCKS:
        # Sparse indices: widen the blocks to the batch's index range over MAX_BLOCKS.
        span = df.agg(F.min(seq_col).alias("lo"), F.max(seq_col).alias("hi")).first()
        assert span is not None and span["lo"] is not None
        lo, hi = int(span["lo"]), int(span["hi"])
        width, offset = max(block_rows, -(-(hi - lo + 1) // MAX_BLOCKS)), lo
        rows = block_maxima(width, offset)
    if not rows:
        frame = (df.withColumn(BLOCK, F.lit(0).cast("long"))
                 .withColumn(P_BEFORE, F.lit(stream_time_before).cast("long")))
        return PrefixScan(frame, (), stream_time_before)
    blocked = df.withColumn(BLOCK, F.expr(f"({quoted} - {offset}L) div {width}L"))
    maxima = sorted((int(r[BLOCK]), r["m"]) for r in rows)
    blocks: list[Block] = []
    running = stream_time_before
    for index, block_max in maxima:
        high = max_opt(running, None if block_max is None else int(block_max))
        blocks.append(Block(index, running, high))
        running = high
    carries = local_rows(spark, [(b.index, b.carry) for b in blocks],
                                    f"{BLOCK} long, {_CARRY} long")
    frame = (blocked.join(F.broadcast(carries), on=BLOCK, how="left")
             .withColumn(P_BEFORE, F.greatest(F.col(_CARRY), before_in_block))
             .drop(_CARRY))
    return PrefixScan(frame, tuple(blocks), running)


