"""Candidate pairs of an interval join by equality keys plus time bins: skew-proof.

A plain equi-join on the keys puts every row of a hot key on one task and compares all its
pairs. The time bounds allow more: when they limit `left - right` to [-a, b] for one pair of
time columns, time is cut into bins of width w >= a + b; each row of one side (the "single"
side) lands in the bin of its time, each row of the other (the "replicated" side) in every bin
its window reaches (at most 2 when w >= a + b). Joining on (keys, bin) finds every matching pair
exactly once (the single side's row is in one bin), and a hot key is spread over as many tasks
as its time range has bins. The whole condition is applied to the candidates afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from joins.sql import ColumnRef

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.interval_join.columns import JoinLayout

BIN = "_bin"
# Bins wider than the window cost replication (up to 2 copies) but give fewer, fuller tasks.
MIN_BIN_MS = 1


@dataclass(frozen=True)
class TimeWindow:
    """`left - right` in [-a, b] for output columns `left`, `right`; bins of `width`."""

    left: str
    right: str
    a: int
    b: int
    width: int

    def single_bin(self, side: Literal["left", "right"]) -> Column:
        from pyspark.sql import functions as F

        col = self.left if side == "left" else self.right
        return F.floor(F.col(col) / F.lit(self.width)).cast("long")

    def replicated_bins(self, side: Literal["left", "right"]) -> Column:
        """The bins of the other side a row of `side` can match: every bin its window reaches."""
        from pyspark.sql import functions as F

        if side == "left":  # right in [left - b, left + a]
            lo, hi = F.col(self.left) - F.lit(self.b), F.col(self.left) + F.lit(self.a)
        else:               # left in [right - a, right + b]
            lo, hi = F.col(self.right) - F.lit(self.a), F.col(self.right) + F.lit(self.b)
        w = F.lit(self.width)
        return F.explode(F.sequence(F.floor(lo / w).cast("long"), F.floor(hi / w).cast("long")))


def time_window(layout: JoinLayout, bin_ms: int | None = None) -> TimeWindow | None:
    """The tightest two-way bound between a left and a right time column (None: none bounds
    both directions of one pair, so rows are matched by keys alone)."""
    plan = layout.spec.plan
    best: tuple[int, ColumnRef, ColumnRef, int, int] | None = None
    for bound in plan.bounds:
        left, right = bound.bounded, bound.reference
        if left.side != "left":
            continue
        window = plan.window(left, right)
        if window is None:
            continue
        a, b = window
        if a + b < 0:
            continue  # an empty window: the condition is never true; nothing to bin
        if best is None or a + b < best[0]:
            best = (a + b, left, right, a, b)
    if best is None:
        return None
    span, left, right, a, b = best
    width = bin_ms if bin_ms is not None else max(span, MIN_BIN_MS)
    return TimeWindow(layout.ref(left), layout.ref(right), a, b, max(width, MIN_BIN_MS))


def binned(frame: DataFrame, window: TimeWindow | None, side: Literal["left", "right"],
           replicate: bool) -> DataFrame:
    """`frame` with BIN: one bin per row, or (replicate) every bin its window reaches."""
    if window is None:
        return frame
    column = window.replicated_bins(side) if replicate else window.single_bin(side)
    return frame.withColumn(BIN, column)


PairsHow = Literal["inner", "left_outer", "right_outer", "left_anti", "right_anti"]


def candidate_pairs(left: DataFrame, right: DataFrame, *, keys: list[tuple[str, str]],
                    window: TimeWindow | None, condition: Column,
                    replicate: Literal["left", "right"], broadcast: Literal["left", "right", None] = None,
                    how: PairsHow = "inner") -> DataFrame:
    """Every (left, right) row pair for which `condition` is TRUE. Column names of the two
    frames must differ (output names plus side-prefixed lineage). `replicate` names the side
    copied into neighbouring bins (the smaller one, or the one to broadcast).

    `how` other than inner keeps a side's rows that match nothing: `left_outer` / `right_outer`
    (Spark pads the other side with nulls) or only those rows, `left_anti` / `right_anti`. The
    kept side must be the one in one bin per row (a row copied into two bins would match in one
    and be kept from the other), so `replicate` must name the other side."""
    from pyspark.sql import functions as F

    kept = None if how == "inner" else how.split("_")[0]
    if kept is not None and window is not None and replicate == kept:
        raise ValueError(f"candidate_pairs: a {how} join keeps the {kept} rows, which must not "
                         f"be the replicated side")

    lb = binned(left, window, "left", replicate == "left")
    rb = binned(right, window, "right", replicate == "right")
    if window is not None:
        lb = lb.withColumnRenamed(BIN, "_l_bin")
        rb = rb.withColumnRenamed(BIN, "_r_bin")
    if broadcast == "left":
        lb = F.broadcast(lb)
    elif broadcast == "right":
        rb = F.broadcast(rb)
    elif window is not None or keys:
        # A shuffled hash join: the (key, bin) groups are small by construction, so hashing one
        # side beats sorting both. An inner join hashes the side that is not replicated; an
        # outer or anti join the side it does not keep, the replicated one (hashing the kept
        # side of an outer join was slower on hot keys, bench/interval_join.py).
        single = "right" if replicate == "left" else "left"
        if (replicate if kept is not None else single) == "right":
            rb = rb.hint("shuffle_hash")
        else:
            lb = lb.hint("shuffle_hash")
    on = [F.col(lk) == F.col(rk) for lk, rk in keys]
    if window is not None:
        on.append(F.col("_l_bin") == F.col("_r_bin"))
    predicate = condition
    for extra in reversed(on):
        predicate = extra & predicate
    if how == "inner" and not on:
        joined = lb.crossJoin(rb).where(condition)
    elif how == "right_anti":
        joined = rb.join(lb, predicate, "left_anti")
    else:
        joined = lb.join(rb, predicate, how)
    if window is not None:
        joined = joined.drop("_l_bin", "_r_bin")
    return joined
