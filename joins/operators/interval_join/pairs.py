"""The joined rows of a batch: each new row against the opposite buffer as the reference sees it.

A pair (x, y) is emitted when the later of the two arrives, and only if the earlier one is in the
buffer then: buffered (not out of bounds, filtered or late), arrived before it, and not evicted
before it (its eviction record comes at or after the later row's segment). Rows of earlier
batches come first in every buffer. So a batch's pairs are, for each side as the later one:
its new buffered or out-of-bounds rows (A) against the opposite side's old buffer and new
buffered rows (B), under the whole condition plus that visibility rule.

A is the batch (small, broadcast and replicated into the time bins); B's old rows are read only
where the bounds let them match the batch: the batch's min / max time (Delta statistics) minus
or plus the postpone times. No shuffle of the buffer, whatever it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from joins.operators.interval_join.bins import TimeWindow, candidate_pairs
from joins.operators.interval_join.classify import (
    BATCH,
    BUFFERED,
    CLASS,
    EVICT,
    OOB,
    POS,
    SEG,
)
from joins.operators.interval_join.columns import SEQ, JoinLayout
from joins.sql import SIDES, ColumnRef, Side
from joins.sql.columns import other_side

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.interval_join.counts import BatchCounts

LINEAGE = (SEQ, POS, BATCH, SEG, EVICT, CLASS)
MIN_POS = -(1 << 63)
# Where the reference emits a row: the position, then the phase at that position, then the
# order inside the phase (the partner's buffer order, or the row's own).
EMIT_POS, EMIT_PHASE, ORDER_BATCH, ORDER_POS, ORDER_SEQ = (
    "_emit_pos", "_emit_phase", "_order_batch", "_order_pos", "_order_seq")
SLOT, SUB = "_slot", "_sub"
PHASE_AT_ARRIVAL, PHASE_JOINED, PHASE_OOB_PAD, PHASE_EVICTED, PHASE_WATERMARK = 0, 1, 2, 3, 5
# `matched_seqs` in one task up to this many rows of a side: a replay one record a batch 6.7 %
# faster. Kept small because that task reads every pair: at 10k new rows against 10k or 1M
# buffered, bench/interval_step.py showed no gain beyond its spread.
FEW_ROWS = 10_000
# A batch up to this many rows is broadcast against the buffers (no shuffle of the buffers).
BROADCAST_MAX_ROWS = 2_000_000


def pairing_sides(counts: BatchCounts, has_old: Mapping[Side, bool]) -> list[Side]:
    """The sides whose new rows can be the later row of a pair, by the batch's class counts: a
    new buffered or out-of-bounds row, with an old or new buffered row on the other side. A
    single-record batch has rows on one side only, so one direction of the pairs (and both in
    a batch of watermark records or late rows) needs no frame at all: nothing to analyse, no
    broadcast job, no branch in the writes' plans."""
    return [s for s in SIDES if counts.of(s, BUFFERED) + counts.of(s, OOB)
            and (has_old[other_side(s)] or counts.of(other_side(s), BUFFERED))]


def lin(side: Side, name: str) -> str:
    """A lineage column of one side inside a pair (`_seq` of the left row is `_l_seq`)."""
    return f"_{side[0]}{name}"


def matched_seqs(pairs: DataFrame, side: Side, *, rows: int) -> DataFrame:
    """`_seq` of the rows of `side` that joined in this batch, once each; `rows`: the side's new
    and buffered rows. Up to FEW_ROWS they are found in one partition and shipped to every
    task, so the anti joins that read them need no shuffle (Spark cannot size the checkpointed
    pairs: it would shuffle and sort both sides of each)."""
    from pyspark.sql import functions as F

    return distinct_ids(pairs.select(F.col(lin(side, SEQ)).alias(SEQ)), shipped=rows <= FEW_ROWS)


def distinct_ids(ids: DataFrame, *, shipped: bool) -> DataFrame:
    """`ids` once each. `shipped`: few enough for one task, so the distinct runs in one
    partition (no shuffle) and every join reading it gets it whole (Spark cannot size a
    checkpoint, so it would shuffle and sort both sides)."""
    from pyspark.sql import functions as F

    return F.broadcast(ids.coalesce(1).distinct()) if shipped else ids.distinct()


def prefixed(frame: DataFrame, layout: JoinLayout, side: Side) -> DataFrame:
    from pyspark.sql import functions as F

    return frame.select(*layout.sides[side].output_names(),
                        *(F.col(c).alias(lin(side, c)) for c in LINEAGE))


def old_rows(old: DataFrame, batch_evict: Column) -> DataFrame:
    """Rows of an earlier batch as buffer rows of this one (before every new row)."""
    from pyspark.sql import functions as F

    return (old.withColumn(SEG, F.lit(-1).cast("long")).withColumn(CLASS, F.lit(BUFFERED))
            .withColumn(EVICT, batch_evict).withColumn(POS, F.lit(MIN_POS).cast("long")))


def narrowed(old: DataFrame, layout: JoinLayout, earlier: Side,
             batch_min: dict[ColumnRef, int], batch_max: dict[ColumnRef, int]) -> DataFrame:
    """Old rows of `earlier` that can match some row whose time columns lie within the batch's
    [min, max] (every bound between a column of each side restricts them)."""
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for bound in layout.spec.plan.bounds:
        if bound.bounded.side == earlier and bound.reference in batch_min:
            # earlier >= later - p  =>  earlier >= min(later) - p
            cond = cond & (F.col(layout.ref(bound.bounded)) >=
                           F.lit(batch_min[bound.reference] - bound.postpone_ms))
        elif bound.reference.side == earlier and bound.bounded in batch_max:
            # later >= earlier - p  =>  earlier <= max(later) + p
            cond = cond & (F.col(layout.ref(bound.reference)) <=
                           F.lit(batch_max[bound.bounded] + bound.postpone_ms))
    return old.where(cond)


def batch_pairs(layout: JoinLayout, new: dict[Side, DataFrame], old: dict[Side, DataFrame | None],
                window: TimeWindow | None, broadcast: bool, batch_id: int,
                later_sides: Sequence[Side] = ("left", "right")) -> DataFrame:
    """Every pair the batch emits, with where it is emitted (EMIT_*, ORDER_*, SLOT).
    `later_sides`: the sides whose new rows are the later of a pair (by default both; the
    caller leaves out a side whose new rows, by the batch's counts, cannot be)."""
    from pyspark.sql import functions as F

    condition = layout.condition()
    keys = layout.join_keys()
    parts = []
    for later in later_sides:
        earlier = other_side(later)
        keep = [*layout.sides[earlier].output_names(), *LINEAGE]
        a = new[later].where(F.col(CLASS).isin(BUFFERED, OOB))
        b = new[earlier].where(F.col(CLASS) == BUFFERED).select(*keep)
        if old[earlier] is not None:
            b = old[earlier].select(*keep).unionByName(b)
        ap, bp = prefixed(a, layout, later), prefixed(b, layout, earlier)
        b_evict = F.col(lin(earlier, EVICT))
        visible = ((F.col(lin(earlier, POS)) < F.col(lin(later, POS)))
                   & (b_evict.isNull() | (b_evict >= F.col(lin(later, SEG)))))
        left, right = (ap, bp) if later == "left" else (bp, ap)
        pairs = candidate_pairs(left, right, keys=keys, window=window,
                                condition=condition & visible, replicate=later,
                                broadcast=later if broadcast else None)
        parts.append(pairs.select(
            *layout.output_columns(), F.col(lin("left", SEQ)), F.col(lin("right", SEQ)),
            F.col(lin(later, POS)).alias(EMIT_POS), F.lit(PHASE_JOINED).alias(EMIT_PHASE),
            F.col(lin(earlier, BATCH)).alias(ORDER_BATCH), F.col(lin(earlier, POS)).alias(ORDER_POS),
            F.col(lin(earlier, SEQ)).alias(ORDER_SEQ),
            (F.col(lin(later, SEG)) * F.lit(2)).alias(SLOT), F.lit(0).cast("long").alias(SUB),
            # Which rows were buffered before this batch (their flags live in `used`).
            (F.col(lin("left", BATCH)) < F.lit(batch_id)).alias(lin("left", "_old")),
            (F.col(lin("right", BATCH)) < F.lit(batch_id)).alias(lin("right", "_old")),
            F.col(lin("left", EVICT)), F.col(lin("right", EVICT))))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out

