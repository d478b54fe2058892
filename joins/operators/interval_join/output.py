"""A batch's output rows besides the pairs: null-padded rows, output watermarks, quarantine, and
the output's lineage columns.

Null-padded rows of an outer side: a filtered row at once; an out-of-bounds row at once if it
joined nothing; a buffered row when it is evicted if it never joined (not when it was buffered,
`_used0`; not in a later batch, `used`; not in this one, the pairs). Output watermarks are rows
of kind `watermark` (`_wm_key`, `_wm_ts`): the output is seed 003's stream of rows and
watermarks, so that a join reading it downstream receives them in order (`_order`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from joins.operators.interval_join.classify import (
    BATCH,
    CLASS,
    EVICT,
    FILTERED,
    OOB,
    POS,
    SEG,
    USED0,
    WHY,
    with_reasons,
)
from joins.operators.interval_join.columns import (
    BATCH_ID,
    EVENT_DATE,
    KIND,
    ORDER,
    REASON,
    SEQ,
    SIDE_SEQ,
    WATERMARK,
    WM_KEY,
    WM_TS,
    JoinLayout,
)
from joins.operators.interval_join.pairs import (
    EMIT_PHASE,
    EMIT_POS,
    ORDER_BATCH,
    ORDER_POS,
    ORDER_SEQ,
    PHASE_AT_ARRIVAL,
    PHASE_EVICTED,
    PHASE_OOB_PAD,
    PHASE_WATERMARK,
    SLOT,
    SUB,
)
from joins.operators.interval_join.timeline import Timeline
from joins.spark.local_rows import local_rows
from joins.sql import SIDES, Side

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.operators.interval_join.counts import BatchCounts

LINEAGE_OUT = (SIDE_SEQ["left"], SIDE_SEQ["right"], KIND, EMIT_POS, EMIT_PHASE, ORDER_BATCH,
               ORDER_POS, ORDER_SEQ, SLOT, SUB, WM_KEY, WM_TS)


def _event_pos(timeline: Timeline, index: Column) -> Column:
    from pyspark.sql import functions as F

    expr = F.lit(None)
    for q, event in enumerate(timeline.events):
        expr = F.when(index == F.lit(q), F.lit(event.pos)).otherwise(expr)
    return expr.cast("long")


def padded(rows: DataFrame, side: Side, *, emit_pos: Column, phase: Column, order: bool,
           slot: Column) -> DataFrame:
    """Rows of one side (output names, SEQ, BATCH, POS) as null-padded output rows; the other
    side's columns are added as nulls by the union."""
    from pyspark.sql import functions as F

    zero = F.lit(0).cast("long")
    return rows.select(
        *[c for c in rows.columns if c not in (SEQ, BATCH, POS, SEG, EVICT, CLASS, USED0)],
        F.col(SEQ).alias(SIDE_SEQ[side]), F.lit(side).alias(KIND), emit_pos.alias(EMIT_POS),
        phase.alias(EMIT_PHASE), (F.col(BATCH) if order else zero).alias(ORDER_BATCH),
        (F.col(POS) if order else zero).alias(ORDER_POS), (F.col(SEQ) if order else zero).alias(ORDER_SEQ),
        slot.alias(SLOT), zero.alias(SUB))


def null_pads(layout: JoinLayout, timeline: Timeline, new: dict[Side, DataFrame],
              evicted_old: dict[Side, DataFrame | None], used: Callable[[Side], DataFrame | None],
              matched: Callable[[Side], DataFrame | None], counts: BatchCounts) -> list[DataFrame]:
    """The null-padded rows of the batch's outer sides. A kind of row the batch's counts say
    it has none of gets no frame: each frame costs Spark an analysis now, a branch of the
    output's plan and its tasks in the write, and (for the anti joins) a job shipping the rows
    that joined; a single-record batch has rows of one class on one side. `used` and `matched`
    (a side's rows that joined in an earlier batch, in this one) are built only for a pad that
    reads them, for the same reason; `matched` is None when the batch has no pairs."""
    from pyspark.sql import functions as F

    out = []
    for rank, side in enumerate(SIDES):
        if side not in layout.spec.outer_sides:
            continue
        cols = [*layout.sides[side].output_names(), SEQ, BATCH, POS]
        rows = new[side]
        seg2 = F.col(SEG) * F.lit(2)
        at = F.col(POS)
        if counts.of(side, FILTERED):
            out.append(padded(rows.where(F.col(CLASS) == FILTERED).select(*cols, SEG), side,
                              emit_pos=at, phase=F.lit(PHASE_AT_ARRIVAL), order=False, slot=seg2))
        if counts.of(side, OOB):
            oob = _unmatched(rows.where(F.col(CLASS) == OOB), matched(side))
            out.append(padded(oob.select(*cols, SEG), side, emit_pos=at,
                              phase=F.lit(PHASE_OOB_PAD), order=False, slot=seg2))
        if not counts.evicted_rows(side):
            continue   # neither a new nor an old row of this side leaves the buffer
        gone = rows.where((F.col(CLASS) == "buffered") & F.col(EVICT).isNotNull()).select(*cols, EVICT)
        old = evicted_old[side]
        if old is not None:
            old = old.where(~F.col(USED0))
            earlier = used(side)
            if earlier is not None:
                old = old.join(earlier, SEQ, "left_anti")
            gone = gone.unionByName(old.select(*cols, EVICT))
        gone = _unmatched(gone, matched(side))
        out.append(padded(gone, side, emit_pos=_event_pos(timeline, F.col(EVICT)),
                          phase=F.lit(PHASE_EVICTED + rank), order=True,
                          slot=F.col(EVICT) * F.lit(2) + F.lit(1)))
    return out


def _unmatched(rows: DataFrame, matched: DataFrame | None) -> DataFrame:
    return rows if matched is None else rows.join(matched, SEQ, "left_anti")


def shape(layout: JoinLayout, new: dict[Side, DataFrame]) -> DataFrame:
    """No rows, and every output column of both sides as the batch's rows type it: the base
    of a batch's output when it has no pairs (its other parts may hold one side or none)."""
    frames = [new[side].select(*layout.sides[side].output_names()).limit(0) for side in SIDES]
    return frames[0].unionByName(frames[1], allowMissingColumns=True)


def watermark_rows(spark: SparkSession, layout: JoinLayout, timeline: Timeline) -> DataFrame | None:
    """The batch's output watermarks as output rows."""
    schema = layout.spec.plan.schema
    order = {c: n for n, c in enumerate(schema.ordered(
        {c for s in timeline.segments for c in s.watermarked} | timeline.final.watermarked))}
    rows = [(WATERMARK, layout.ref(c), value, timeline.events[q].pos, PHASE_WATERMARK, 0,
             order[c], 0, 2 * q + 1, 1 + order[c]) for q, c, value in timeline.emitted]
    if not rows:
        return None
    return local_rows(spark, rows, f"{KIND} string, {WM_KEY} string, {WM_TS} long, "
                                      f"{EMIT_POS} long, {EMIT_PHASE} int, {ORDER_BATCH} long, "
                                      f"{ORDER_POS} long, {ORDER_SEQ} long, {SLOT} long, {SUB} long")


def finish_output(parts: list[DataFrame], layout: JoinLayout, batch_id: int) -> DataFrame:
    """The union of a batch's output parts with the output's lineage columns."""
    from pyspark.sql import functions as F

    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    # One projection for every missing lineage column: each `withColumn` would have Spark
    # analyse the whole union again.
    present = set(union.columns)
    missing = [F.lit(None).alias(name) for name in LINEAGE_OUT if name not in present]
    if missing:
        union = union.select("*", *missing)
    order = (F.lit(batch_id).cast("long") * F.lit(1 << 40) + F.col(SLOT) * F.lit(1 << 16)
             + F.col(SUB))
    return union.select(
        *layout.output_columns(), F.col(SIDE_SEQ["left"]).cast("long"),
        F.col(SIDE_SEQ["right"]).cast("long"), F.col(KIND).cast("string"),
        F.col(WM_KEY).cast("string"), F.col(WM_TS).cast("long"), identity().alias(SEQ),
        order.cast("long").alias(ORDER), F.lit(batch_id).cast("long").alias(BATCH_ID),
        F.col(EMIT_POS).cast("long"), F.col(EMIT_PHASE).cast("int"),
        F.col(ORDER_BATCH).cast("long"), F.col(ORDER_POS).cast("long"), F.col(ORDER_SEQ).cast("long"),
        event_day(layout).alias(EVENT_DATE))


def event_time(layout: JoinLayout) -> Column:
    """An output row's event time: the left row's first time column (config order), or the
    right row's for a right row padded alone; null for a watermark."""
    from pyspark.sql import functions as F

    when = F.lit(None).cast("long")
    for side in ("right", "left"):
        firsts = layout.time_columns(side)
        if firsts:
            when = F.when(F.col(SIDE_SEQ[side]).isNotNull(), F.col(layout.ref(firsts[0]))).otherwise(when)
    return when


def event_day(layout: JoinLayout) -> Column:
    """The output's partition: the UTC day of `event_time`."""
    from joins.spark.exprs import event_date

    return event_date(event_time(layout))


def identity() -> Column:
    """An output row's identity (`_seq`): the rows it joins (or the watermark), hashed. A
    backfill matches its rows to the micro-batches' by it; a downstream join buffers by it."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.col(KIND), F.col(SIDE_SEQ["left"]), F.col(SIDE_SEQ["right"]),
                      F.col(WM_KEY), F.col(WM_TS))


def quarantine_rows(layout: JoinLayout, timeline: Timeline, new: dict[Side, DataFrame],
                    batch_id: int, late: bool) -> DataFrame:
    """Invalid rows, and late rows under `late: quarantine`, with the reason."""
    from pyspark.sql import functions as F

    classes = ["invalid", "late"] if late else ["invalid"]
    parts = []
    for side in SIDES:
        rows = with_reasons(new[side].where(F.col(CLASS).isin(*classes)), layout, side,
                            timeline)
        parts.append(rows.select(*layout.sides[side].output_names(),
                                 F.col(SEQ).alias(SIDE_SEQ[side]), F.lit(side).alias("side"),
                                 F.col(CLASS).alias("kind"), F.col(WHY).alias(REASON),
                                 F.col(POS).alias(EMIT_POS)))
    union = parts[0].unionByName(parts[1], allowMissingColumns=True)
    return union.select(*layout.output_columns(), F.col(SIDE_SEQ["left"]).cast("long"),
                        F.col(SIDE_SEQ["right"]).cast("long"), "side", "kind", REASON, EMIT_POS,
                        F.lit(batch_id).cast("long").alias(BATCH_ID))
