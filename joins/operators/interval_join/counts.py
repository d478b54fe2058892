"""How many rows of a batch fall in each class, and the `max_buffered_rows` check, before any
commit: one small aggregate, collected (a row per side, class, segment and eviction record).

The reference checks the limit each time it buffers a row: the rows buffered then (both sides)
must be below it. Inside a segment the buffers only grow (evictions happen at watermark
records), so the limit is broken in segment s exactly when the buffers hold more than the limit
at its end, and the row that breaks it is the (limit - held at its start + 1)-th buffered there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from joins.errors import StateLimitError
from joins.operators.interval_join.classify import BUFFERED, CLASS, EVICT, POS, SEG
from joins.operators.interval_join.columns import SEQ, JoinLayout
from joins.sql import SIDES, ColumnRef, Side

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

OLD = "old"


@dataclass
class BatchCounts:
    """Counts per (side, class); evictions per (side, record index) of old and new rows."""

    by_class: Counter[tuple[Side, str]] = field(default_factory=Counter)
    inserted: Counter[tuple[Side, int]] = field(default_factory=Counter)   # (side, segment)
    evicted: Counter[tuple[Side, int]] = field(default_factory=Counter)    # (side, record)

    def of(self, side: Side, klass: str) -> int:
        return self.by_class[(side, klass)]

    def rows(self, side: Side) -> int:
        """The batch's rows of `side`, every class."""
        return sum(n for (s, _c), n in self.by_class.items() if s == side)

    def evicted_rows(self, side: Side) -> int:
        return sum(n for (s, _q), n in self.evicted.items() if s == side)


def count_batch(new: dict[Side, DataFrame], old_evicted: dict[Side, DataFrame | None]) -> BatchCounts:
    from pyspark.sql import functions as F

    frames = []
    for side in SIDES:
        frames.append(new[side].select(F.lit(side).alias("side"), F.col(CLASS).alias("class"),
                                       F.col(SEG).alias("seg"), F.col(EVICT).alias("evict")))
        old = old_evicted[side]
        if old is not None:
            frames.append(old.select(F.lit(side).alias("side"), F.lit(OLD).alias("class"),
                                     F.lit(-1).cast("long").alias("seg"), F.col(EVICT).alias("evict")))
    union = frames[0]
    for extra in frames[1:]:
        union = union.unionByName(extra)
    counts = BatchCounts()
    for row in union.groupBy("side", "class", "seg", "evict").count().collect():
        side, klass, n = row["side"], row["class"], int(row["count"])
        if klass != OLD:
            counts.by_class[(side, klass)] += n
        if klass == BUFFERED:
            counts.inserted[(side, int(row["seg"]))] += n
        if klass in (BUFFERED, OLD) and row["evict"] is not None:
            counts.evicted[(side, int(row["evict"]))] += n
    return counts


def limit_breach(counts: BatchCounts, held: dict[Side, int], segments: int,
                 limit: int) -> tuple[int, int] | None:
    """(segment, k) where the k-th row buffered in that segment would exceed `limit`."""
    size = sum(held.values())
    for s in range(segments):
        start = size
        size += sum(counts.inserted[(side, s)] for side in SIDES)
        if size > limit and size > start:
            return s, max(limit - start + 1, 1)
        size -= sum(counts.evicted[(side, s)] for side in SIDES)
    return None


def raise_limit(new: dict[Side, DataFrame], counts: BatchCounts, held: dict[Side, int],
                breach: tuple[int, int], limit: int, operator: str) -> None:
    """Name the side and the record of the row that breaks the limit, and what to do."""
    from pyspark.sql import functions as F

    segment, k = breach
    frames = [new[side].where((F.col(CLASS) == BUFFERED) & (F.col(SEG) == segment))
              .select(F.lit(side).alias("side"), POS, SEQ) for side in SIDES]
    rows = frames[0].unionByName(frames[1]).orderBy(POS, "side").limit(k).collect()
    row = rows[-1]
    before = {side: held[side] for side in SIDES}
    raise StateLimitError(
        f"{operator}: buffering the {row['side']} row {SEQ}={row[SEQ]} would exceed "
        f"max_buffered_rows={limit} (buffered when the batch started: left {before['left']}, "
        f"right {before['right']} rows; this batch buffers {counts.of('left', BUFFERED)} left "
        f"and {counts.of('right', BUFFERED)} right rows before its watermarks evict any); the "
        f"watermarks do not evict rows fast enough for this limit. Nothing of this batch was "
        f"committed. Raise max_buffered_rows (the planned batch is then re-run as it is), or "
        f"lower the allowed lag or tighten the time bounds so that rows leave sooner")


def buffered_minima(needed: list[tuple[int, ColumnRef]], positions: list[int], layout: JoinLayout,
                    new: dict[Side, DataFrame], old: dict[Side, DataFrame | None],
                    ) -> dict[tuple[int, ColumnRef], int | None]:
    """For each (watermark record q, column without a bound): the minimum of the column over
    the rows still buffered right after q (one aggregate per side that needs it)."""
    from pyspark.sql import functions as F

    out: dict[tuple[int, ColumnRef], int | None] = {}
    for side in SIDES:
        wanted = [(q, c) for q, c in needed if c.side == side]
        if not wanted:
            continue
        cols = [layout.ref(c) for _q, c in wanted]
        rows = new[side].where(F.col(CLASS) == BUFFERED).select(*set(cols), POS, EVICT)
        if old[side] is not None:
            rows = rows.unionByName(old[side].select(*set(cols), F.lit(-(1 << 63)).alias(POS), EVICT))
        aggs = []
        for n, (q, c) in enumerate(wanted):
            alive = (F.col(POS) < F.lit(positions[q])) & (
                F.col(EVICT).isNull() | (F.col(EVICT) > F.lit(q)))
            aggs.append(F.min(F.when(alive, F.col(layout.ref(c)))).alias(f"m{n}"))
        row = rows.agg(*aggs).first()
        assert row is not None
        for n, key in enumerate(wanted):
            out[key] = None if row[f"m{n}"] is None else int(row[f"m{n}"])
    return out
