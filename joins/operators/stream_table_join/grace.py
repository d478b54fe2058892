"""The grace buffer of KIP-923 (seed 001) decided for a whole micro-batch at once.

The reference processor handles a batch's stream records one at a time (after the batch's table
records, which every lookup of the batch therefore sees). What it does depends only on the
buffer's stream time each record sees on arrival, the running max of the ts of the records put
before it. So a batch is decided in three set-wise steps:

1. Prefix stream time. `_p_before` = max(stream time before the batch, ts of every earlier
   eligible record of the batch). Late records never move it (their ts is below it), and
   skipped records (null value; null table key in an inner join) are never put, so the running
   max over *all eligible* records is exact. Computed distributed: arrival indices are cut into
   contiguous blocks, one max per block is collected (a few numbers), the carry into each block
   is a tiny prefix on the driver, and a window partitioned by block finishes it.
2. Classification. With grace, a record is late iff ts < `_p_before` - grace (then `late`
   decides: join at once, drop, quarantine), otherwise it is put into the buffer. Without grace
   every eligible record is joined on arrival.
3. Eviction. Stream time only grows, so the records evicted during the batch are exactly the
   buffered ones (old buffer + new puts) with ts <= final stream time - grace, and every one of
   them is joined against the same table state (the batch's table records came first).

Emission order (what the replay reports) is the reference's too: a late-joined record at its
own arrival, an evicted record at the put that evicted it, in (ts, arrival) order there. The put
that evicts a record with ts t is its own put when its own arrival already lifts stream time to
t + grace, else the first later put that sets stream time to >= t + grace. Puts that raise
stream time ("record setters") have strictly increasing ts, so that put is the record setter
with the smallest ts >= t + grace: found per block (the block whose stream-time interval holds
t + grace) by a descending sort, without any global window.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.operators.stream_table_join.columns import EMIT_SEQ, LATE, REASON, TABLE_KEY
from joins.operators.stream_table_join.prefix import (
    BLOCK,
    DEFAULT_BLOCK_ROWS,
    P_BEFORE,
    Block,
    max_opt,
    prefix_stream_time,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

CLASS = "_class"
_SCAN_TS = "_scan_ts"
_NEW = "_new"
_P_AFTER = "_p_after"
_QBLOCK = "_qblock"
_LO, _HI = "_lo", "_hi"
_V, _KIND, _RS_SEQ = "_v", "_kind", "_rs_seq"

# Classes of a batch's new stream records (the reference processor's counters use these names).
SKIPPED_NULL_VALUE = "skipped_null_value"
SKIPPED_NULL_KEY = "skipped_null_key"
LATE_CLASS = "late"
PUT = "put"          # put into the grace buffer
JOINED = "joined"    # no grace: joined on arrival

_MIN_LONG = -(1 << 63)


# Sentinel numbers fed to the reference processor to read its quarantine reason as a template:
# distinct, and unlike any other number the text could hold.
_S_GRACE, _S_STREAM_TIME, _S_TS = 7919, 1_000_003, 11


@functools.cache
def _late_reason_template() -> str:
    """The reference processor's quarantine reason with `{ts}`, `{st}`, `{grace}`, `{bound}`
    and `{needed}` in place of the numbers: the Spark expression and the reference then word
    their reasons identically, whatever the wording is."""
    from joins.operators.stream_table_join.reference import StreamTableJoinProcessor
    from joins.operators.stream_table_join.spec import StreamTableJoinSpec, StreamTableRecord

    spec = StreamTableJoinSpec.model_validate(
        {"join": "left", "table": {"versioned": True, "history_retention_ms": _S_GRACE},
         "grace_ms": _S_GRACE, "late": "quarantine"})
    processor = StreamTableJoinProcessor(spec)
    processor.process(StreamTableRecord(i=0, side="stream", key="k", value="v", ts=_S_STREAM_TIME))
    items = processor.process(StreamTableRecord(i=1, side="stream", key="k", value="v", ts=_S_TS))
    text = str(items[0]["reason"]).replace("{", "{{").replace("}", "}}")
    names = {_S_TS: "{ts}", _S_STREAM_TIME: "{st}", _S_GRACE: "{grace}",
             _S_STREAM_TIME - _S_GRACE: "{bound}", _S_STREAM_TIME - _S_TS: "{needed}"}
    return re.sub(r"-?\d+", lambda m: names.get(int(m.group()), m.group()), text)


def late_reason_text(ts: int, stream_time: int, grace_ms: int) -> str:
    """The quarantine reason of a late record, word for word the reference processor's."""
    return _late_reason_template().format(ts=ts, st=stream_time, grace=grace_ms,
                                          bound=stream_time - grace_ms, needed=stream_time - ts)


def late_reason(ts: Column, stream_time: Column, grace_ms: int) -> Column:
    """`late_reason_text` as a Spark expression."""
    from pyspark.sql import functions as F

    fmt = _late_reason_template().replace("%", "%%").format(
        ts="%1$d", st="%2$d", grace=grace_ms, bound="%3$d", needed="%4$d")
    return F.format_string(fmt, ts, stream_time, stream_time - F.lit(grace_ms), stream_time - ts)


@dataclass(frozen=True)
class Decision:
    """What one batch does with its stream records, before any table lookup."""

    classified: DataFrame          # new records + CLASS, P_BEFORE, BLOCK
    to_join: DataFrame             # stream columns + TABLE_KEY, EMIT_SEQ, LATE
    quarantine: DataFrame | None   # stream columns + REASON, stream_time, grace_ms
    buffer_after: DataFrame | None  # stream columns: what stays buffered
    stream_time_after: int | None
    evict_bound: int | None        # records with ts <= this were evicted (None: none)


def classify(new: DataFrame, spec: StreamTableJoinSpec, *, value_cols: list[str]) -> Column:
    """CLASS of a skipped record (null otherwise): a null value (every value column null) is
    skipped as Kafka does; an inner join skips a null table key."""
    from pyspark.sql import functions as F

    value_null = F.lit(False)
    if value_cols:
        value_null = F.lit(True)
        for c in value_cols:
            value_null = value_null & F.col(c).isNull()
    cls = F.when(value_null, F.lit(SKIPPED_NULL_VALUE))
    if spec.join == "inner":
        cls = cls.when(F.col(TABLE_KEY).isNull(), F.lit(SKIPPED_NULL_KEY))
    return cls


@dataclass(frozen=True)
class Scanned:
    """A batch's new stream records with CLASS and P_BEFORE (step 1 and 2 above). With
    `single_block` the blocks and the stream time after the batch are not known yet: the
    caller's aggregate over `classified` gives the largest eligible ts (`single_block_blocks`)."""

    classified: DataFrame
    blocks: tuple[Block, ...]
    stream_time_after: int | None
    single_block: bool


def scan_batch(new: DataFrame, spec: StreamTableJoinSpec, *, value_cols: list[str], ts: str,
               seq: str, stream_time_before: int | None, block_rows: int = DEFAULT_BLOCK_ROWS,
               seq_span: tuple[int, int] | None = None) -> Scanned:
    """Classify a batch's new stream records (`new` holds the stream columns plus TABLE_KEY)."""
    from pyspark.sql import functions as F

    skipped = classify(new, spec, value_cols=value_cols)
    marked = new.withColumn(CLASS, skipped).withColumn(
        _SCAN_TS, F.when(F.col(CLASS).isNull(), F.col(ts)))
    scan = prefix_stream_time(marked, ts_col=_SCAN_TS, seq_col=seq,
                              stream_time_before=stream_time_before, block_rows=block_rows,
                              seq_span=seq_span)
    frame = scan.frame.drop(_SCAN_TS)
    if spec.grace_ms is None:
        classified = frame.withColumn(CLASS, F.coalesce(F.col(CLASS), F.lit(JOINED)))
    else:
        is_late = F.col(P_BEFORE).isNotNull() & (F.col(ts) < F.col(P_BEFORE) - F.lit(spec.grace_ms))
        classified = frame.withColumn(CLASS, F.coalesce(
            F.col(CLASS), F.when(is_late, F.lit(LATE_CLASS)).otherwise(F.lit(PUT))))
    return Scanned(classified, scan.blocks, scan.stream_time_after, scan.single_block)


def single_block_blocks(stream_time_before: int | None,
                        max_eligible_ts: int | None) -> tuple[tuple[Block, ...], int | None]:
    """(blocks, stream time after) of a one-block batch from the largest ts of its eligible
    records (late records never raise it: their ts is below stream time)."""
    after = max_opt(stream_time_before, max_eligible_ts)
    return ((Block(0, stream_time_before, after),) if after is not None else ()), after


def resolve(classified: DataFrame, buffer: DataFrame | None, spec: StreamTableJoinSpec, *,
            blocks: tuple[Block, ...], stream_time_after: int | None, stream_cols: list[str],
            ts: str, seq: str) -> Decision:
    """Step 3: what is joined (evicted and late-joined records), quarantined and kept."""
    from pyspark.sql import functions as F

    keep = [*stream_cols, TABLE_KEY]
    if spec.grace_ms is None:
        to_join = classified.where(F.col(CLASS) == JOINED).select(
            *keep, F.col(seq).alias(EMIT_SEQ), F.lit(False).alias(LATE))
        return Decision(classified, to_join, None, None, stream_time_after, None)

    grace = spec.grace_ms
    late = classified.where(F.col(CLASS) == LATE_CLASS)
    puts = classified.where(F.col(CLASS) == PUT)
    pool_new = puts.select(*keep, F.lit(True).alias(_NEW),
                           F.greatest(F.col(P_BEFORE), F.col(ts)).alias(_P_AFTER))
    pool = pool_new
    if buffer is not None:
        pool = buffer.select(*keep, F.lit(False).alias(_NEW),
                             F.lit(None).cast("long").alias(_P_AFTER)).unionByName(pool_new)
    bound = None if stream_time_after is None else stream_time_after - grace

    parts: list[DataFrame] = []
    if bound is not None:
        evicted = pool.where(F.col(ts) <= F.lit(bound))
        x = F.col(ts) + F.lit(grace)
        at_own_put = F.col(_NEW) & F.coalesce(x <= F.col(_P_AFTER), F.lit(False))
        parts.append(evicted.where(at_own_put).select(
            *keep, F.col(seq).alias(EMIT_SEQ), F.lit(False).alias(LATE)))
        parts.append(_evicted_by_later_put(evicted.where(~at_own_put), puts, blocks,
                                           keep=keep, ts=ts, seq=seq, grace=grace))
    if spec.late == "join":
        parts.append(late.select(*keep, F.col(seq).alias(EMIT_SEQ), F.lit(True).alias(LATE)))
    to_join = parts[0] if parts else puts.select(
        *keep, F.col(seq).alias(EMIT_SEQ), F.lit(False).alias(LATE)).limit(0)
    for part in parts[1:]:
        to_join = to_join.unionByName(part)

    quarantine = None
    if spec.late == "quarantine":
        quarantine = late.select(*stream_cols,
                                 late_reason(F.col(ts), F.col(P_BEFORE), grace).alias(REASON),
                                 F.col(P_BEFORE).alias("stream_time"),
                                 F.lit(grace).cast("long").alias("grace_ms"))
    remaining = pool if bound is None else pool.where(F.col(ts) > F.lit(bound))
    return Decision(classified, to_join, quarantine, remaining.select(*stream_cols),
                    stream_time_after, bound)


def decide(new: DataFrame, buffer: DataFrame | None, spec: StreamTableJoinSpec, *,
           stream_cols: list[str], value_cols: list[str], ts: str, seq: str,
           stream_time_before: int | None, block_rows: int = DEFAULT_BLOCK_ROWS) -> Decision:
    """Decide a batch in one call (`scan_batch` then `resolve`). `new` (the batch's stream
    records) and `buffer` (the grace buffer it starts from) hold `stream_cols` plus TABLE_KEY."""
    scanned = scan_batch(new, spec, value_cols=value_cols, ts=ts, seq=seq,
                         stream_time_before=stream_time_before, block_rows=block_rows)
    return resolve(scanned.classified, buffer, spec, blocks=scanned.blocks,
                   stream_time_after=scanned.stream_time_after, stream_cols=stream_cols, ts=ts,
                   seq=seq)


def _evicted_by_later_put(queries: DataFrame, puts: DataFrame, blocks: tuple[Block, ...], *,
                          keep: list[str], ts: str, seq: str, grace: int) -> DataFrame:
    """EMIT_SEQ of evicted records whose own put (if any) did not evict them: the arrival index
    of the record setter with the smallest ts >= ts + grace."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark = puts.sparkSession
    # Stream-time intervals (carry, high] of the blocks that raised stream time.
    intervals = [(b.index, _MIN_LONG if b.carry is None else b.carry, b.high) for b in blocks
                 if b.high is not None and (b.carry is None or b.high > b.carry)]
    x = F.col(ts) + F.lit(grace)
    if len(intervals) == 1:
        # A one-block batch (most micro-batches): a filter, not a join with a one-row frame
        # (whose broadcast is a Spark job of its own).
        index, lo, hi = intervals[0]
        located = (queries.where((x > F.lit(lo)) & (x <= F.lit(hi)))
                   .select(*keep, F.lit(index).cast("long").alias(_QBLOCK), x.alias(_V),
                           F.lit(1).alias(_KIND)))
    else:
        spans = spark.createDataFrame(intervals, f"{_QBLOCK} long, {_LO} long, {_HI} long")
        located = (queries.join(F.broadcast(spans), (x > F.col(_LO)) & (x <= F.col(_HI)))
                   .select(*keep, F.col(_QBLOCK), x.alias(_V), F.lit(1).alias(_KIND)))
    setters = puts.where(F.col(P_BEFORE).isNull() | (F.col(ts) > F.col(P_BEFORE))).select(
        F.col(BLOCK).alias(_QBLOCK), F.col(ts).alias(_V), F.lit(0).alias(_KIND),
        F.col(seq).alias(_RS_SEQ))
    # Descending by value, setters first on a tie (a setter with ts == t + grace evicts it): the
    # last setter seen so far is the closest one at or above the query's value.
    window = (Window.partitionBy(_QBLOCK).orderBy(F.col(_V).desc(), F.col(_KIND).asc())
              .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    merged = located.unionByName(setters, allowMissingColumns=True)
    return (merged.withColumn(EMIT_SEQ, F.last(_RS_SEQ, ignorenulls=True).over(window))
            .where(F.col(_KIND) == 1)
            .select(*keep, F.col(EMIT_SEQ), F.lit(False).alias(LATE)))
