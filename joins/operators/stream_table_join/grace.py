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

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.operators.stream_table_join.columns import EMIT_SEQ, LATE, REASON, TABLE_KEY
from joins.operators.stream_table_join.late import late_reason
from joins.spark.local_rows import local_rows
from joins.versioned.prefix import (
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
_QBLOCK = "_qblock"
_LO, _HI = "_lo", "_hi"
_V, _KIND, _RS_SEQ = "_v", "_kind", "_rs_seq"

# Classes of a batch's new stream records (the reference processor's counters use these names).
SKIPPED_NULL_VALUE = "skipped_null_value"
SKIPPED_NULL_KEY = "skipped_null_key"
LATE_CLASS = "late"
PUT = "put"          # put into the grace buffer
JOINED = "joined"    # no grace: joined on arrival
CLASSES = (SKIPPED_NULL_VALUE, SKIPPED_NULL_KEY, LATE_CLASS, PUT, JOINED)
ELIGIBLE = (PUT, JOINED, LATE_CLASS)  # not skipped: these see (and may move) stream time
ELIGIBLE_SQL = f"{CLASS} IN ({', '.join(repr(c) for c in ELIGIBLE)})"

_MIN_LONG = -(1 << 63)


# What becomes of a record of `Decision.decided` (null: nothing, a skipped or dropped record).
FATE = "_fate"
JOIN_FATE, KEEP_FATE, QUARANTINE_FATE = "join", "keep", "quarantine"


@dataclass(frozen=True)
class Decision:
    """What one batch does with its stream records, before any table lookup.

    `decided` holds every new record (CLASS, P_BEFORE, FATE, EMIT_SEQ, LATE) and every buffered
    record the batch evicts (CLASS null): one frame, so that a step materializes the decision
    in one Spark action and reads its counts from that action (`decision_metrics`). The
    buffered records that stay are `kept_buffer`, a filter of the state as read: a
    materialized decision never copies the whole buffer. A batch without new records decides
    nothing (`decide.py`): `decided` is None and so are the frames built on it."""

    decided: DataFrame | None
    kept_buffer: DataFrame | None
    stream_cols: tuple[str, ...]
    ts: str
    grace_ms: int | None
    late: str
    stream_time_after: int | None
    evict_bound: int | None        # records with ts <= this were evicted (None: none)
    # `decided` carries BATCH_ID (the one-task path stamps it: a per-batch value in a row,
    # where a literal in the output projection would change its generated code every batch).
    stamped: bool = False

    def with_decided(self, frame: DataFrame) -> Decision:
        """The same decision read from `frame` (e.g. a checkpoint of `decided`)."""
        return dataclasses.replace(self, decided=frame)

    @property
    def to_join(self) -> DataFrame | None:
        """The records joined in this batch: stream columns + TABLE_KEY, EMIT_SEQ, LATE
        (+ BATCH_ID when stamped), and the decision's own columns (CLASS, P_BEFORE, FATE),
        which the output's projection leaves out (not projected away here: every Dataset call
        is an analysis on the driver, a few ms of a micro-batch)."""
        if self.decided is None:
            return None
        return self.decided.where(f"{FATE} = '{JOIN_FATE}'")

    @property
    def quarantine(self) -> DataFrame | None:
        """Stream columns + REASON, stream_time, grace_ms (late = "quarantine" only)."""
        from pyspark.sql import functions as F

        if self.grace_ms is None or self.late != "quarantine" or self.decided is None:
            return None
        from joins.spark.exprs import ident

        return self.decided.where(F.col(FATE) == QUARANTINE_FATE).select(
            *self.stream_cols,
            late_reason(ident(self.ts), ident(P_BEFORE), self.grace_ms).alias(REASON),
            F.col(P_BEFORE).alias("stream_time"), F.lit(self.grace_ms).cast("long").alias("grace_ms"))

    @property
    def buffer_after(self) -> DataFrame | None:
        """Stream columns: what stays buffered (None without grace, or when nothing was
        decided: the buffer is then what it was)."""
        from joins.spark.exprs import ident

        if self.grace_ms is None or self.decided is None:
            return None
        staying = self.decided.where(f"{FATE} = '{KEEP_FATE}'").selectExpr(
            *(ident(c) for c in self.stream_cols))
        if self.kept_buffer is None:
            return staying
        return self.kept_buffer.select(*self.stream_cols).unionByName(staying)


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

    carried = [*stream_cols, TABLE_KEY, CLASS, P_BEFORE]
    cls = F.col(CLASS)

    def decision(decided: DataFrame, kept: DataFrame | None, bound: int | None) -> Decision:
        return Decision(decided, kept, tuple(stream_cols), ts, spec.grace_ms, spec.late,
                        stream_time_after, bound)

    if spec.grace_ms is None:
        decided = classified.select(*carried, F.when(cls == JOINED, F.lit(JOIN_FATE)).alias(FATE),
                                    F.col(seq).alias(EMIT_SEQ), F.lit(False).alias(LATE))
        return decision(decided, None, None)

    grace = spec.grace_ms
    bound = None if stream_time_after is None else stream_time_after - grace
    is_put = cls == PUT
    evicted = F.lit(False) if bound is None else F.col(ts) <= F.lit(bound)
    # A put evicts itself when its own arrival lifts stream time to ts + grace.
    at_own_put = F.coalesce(F.col(ts) + F.lit(grace) <= F.greatest(F.col(P_BEFORE), F.col(ts)),
                            F.lit(False))
    late_fate = {"join": JOIN_FATE, "quarantine": QUARANTINE_FATE}.get(spec.late)
    fate = (F.when(cls == LATE_CLASS, F.lit(late_fate))
            .when(is_put & ~evicted, F.lit(KEEP_FATE))
            .when(is_put & at_own_put, F.lit(JOIN_FATE)))
    by_later_put = F.coalesce(is_put & evicted & ~at_own_put, F.lit(False))
    parts = [classified.where(~by_later_put).select(
        *carried, fate.alias(FATE), F.col(seq).alias(EMIT_SEQ), (cls == LATE_CLASS).alias(LATE))]
    kept = buffer
    if bound is not None:
        queries = classified.where(by_later_put).select(*carried)
        if buffer is not None:
            old = buffer.where(F.col(ts) <= F.lit(bound)).select(
                *stream_cols, TABLE_KEY, F.lit(None).cast("string").alias(CLASS),
                F.lit(None).cast("long").alias(P_BEFORE))
            queries = old.unionByName(queries)
            kept = buffer.where(F.col(ts) > F.lit(bound))
        puts = classified.where(is_put)
        parts.append(_evicted_by_later_put(queries, puts, blocks, keep=carried, ts=ts, seq=seq,
                                           grace=grace)
                     .select(*carried, F.lit(JOIN_FATE).alias(FATE), EMIT_SEQ,
                             F.lit(False).alias(LATE)))
    decided = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return decision(decided, kept, bound)


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
    """`keep` + EMIT_SEQ of evicted records whose own put (if any) did not evict them: the
    arrival index of the record setter with the smallest ts >= ts + grace."""
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
        spans = local_rows(spark, intervals, f"{_QBLOCK} long, {_LO} long, {_HI} long")
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
            .select(*keep, F.col(EMIT_SEQ)))
