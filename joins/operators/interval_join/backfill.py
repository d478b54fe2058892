"""Backfill of the interval join: recompute whole event days with the batch form from the input
rows the micro-batches have consumed; the runtime replaces exactly those days in one commit.

An output row's day is the day of its left row's first time column (a right row padded alone:
the right row's). A day's rows need the neighbouring rows within the bounds: the left rows of
the day join right rows up to the bounds' window away, and a right row of the day is unmatched
only if no left row within the window matches it. So both inputs are read for the days widened
by the window (all of them when no bound limits both directions of those two columns).

Only complete days are recomputed: every row of the day, and every row that could join one,
has left the buffers (the output watermark of every time column is past the day's end plus
the largest postpone time), so no later micro-batch adds to the day. A late row that the
micro-batches dropped or quarantined is joined here: the report counts it as added, which is
what the agreement check flags and a backfill corrects.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins.core.time import DAY_MS
from joins.errors import ConfigError
from joins.incremental.backfill import BackfillContext, BackfillResult, BackfillRows, run_backfill
from joins.incremental.layout import JoinRoot
from joins.operators.interval_join.columns import (
    EVENT_DATE,
    KIND,
    SEQ,
    SIDE_SEQ,
    WM_KEY,
    WM_TS,
    JoinLayout,
)
from joins.operators.interval_join.output import event_day, identity
from joins.operators.interval_join.spark_batch import interval_join
from joins.operators.interval_join.spark_incremental import APP, IntervalJoinStep
from joins.operators.interval_join.timeline import state_of
from joins.sql import SIDES, Side

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession



def settled_until(step: IntervalJoinStep, carry: dict[str, Any]) -> int | None:
    """The time before which every output row is final: the smallest output watermark of the
    time columns minus the largest postpone time (None: nothing yet)."""
    plan = step.spec.plan
    state = state_of(carry, plan)
    values = [state.last_emitted.get(c) for c in plan.time_columns]
    if not values or any(v is None for v in values):
        return None
    postpone = max((abs(b.postpone_ms) for b in plan.bounds), default=0)
    return min(v for v in values if v is not None) - postpone


def _day_start(day: dt.date) -> int:
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp() * 1000)


def day_complete(day: dt.date, settled: int | None) -> bool:
    """Is every output row of `day` final (`settled_until`)?"""
    return settled is not None and _day_start(day) + DAY_MS <= settled


@dataclass
class IntervalBatchForm:
    step: IntervalJoinStep

    def backfill_rows(self, ctx: BackfillContext, days: list[dt.date]) -> BackfillRows:
        from pyspark.sql import functions as F

        step, layout = self.step, self.step.layout
        done = ctx.last_done
        if done is None:
            return BackfillRows(None)
        settled = settled_until(step, done.carry)
        if not day_complete(days[-1], settled):
            raise ConfigError(
                f"{APP}: day {days[-1]} is not complete: micro-batches may still add rows to it "
                f"(rows are final before {settled}, from the output watermarks minus the largest "
                f"postpone time); backfill days that end by then")
        frames: dict[Side, DataFrame] = {}
        for side in SIDES:
            frames[side] = self._side(ctx, layout, side, days)
        joined = interval_join(frames["left"], frames["right"], step.spec,
                               left_columns=layout.sides["left"].inputs,
                               right_columns=layout.sides["right"].inputs,
                               left_id=SEQ, right_id=SEQ, bin_ms=step.bin_ms)
        rows = joined.rows.select(
            "*", F.lit(None).cast("string").alias(WM_KEY), F.lit(None).cast("long").alias(WM_TS))
        rows = rows.select("*", identity().alias(SEQ), event_day(layout).alias(EVENT_DATE))
        rows = rows.where(F.col(EVENT_DATE).isin(days)).drop(WM_KEY, WM_TS)
        compared = (*layout.output_columns(), KIND, SIDE_SEQ["left"], SIDE_SEQ["right"],
                    EVENT_DATE)
        return BackfillRows(rows, identity=(SEQ,), compared=compared,
                            release=joined.release)

    def _side(self, ctx: BackfillContext, layout: JoinLayout, side: Side,
              days: list[dt.date]) -> DataFrame:
        """The consumed data rows of `side` that can matter for `days`."""
        from pyspark.sql import functions as F

        from joins import lake
        from joins.operators.interval_join.bins import time_window

        version = ctx.consumed(side)
        rows = lake.read_delta(ctx.spark, ctx.sources[side].path, version=version)
        if WM_KEY in rows.columns:
            rows = rows.where(F.col(WM_KEY).isNull())
        firsts = layout.time_columns(side)
        window = time_window(layout)
        lfirst = layout.time_columns("left")
        rfirst = layout.time_columns("right")
        if not firsts or window is None or not lfirst or not rfirst or (
                window.left, window.right) != (layout.ref(lfirst[0]), layout.ref(rfirst[0])):
            return rows
        lo, hi = _day_start(days[0]), _day_start(days[-1]) + DAY_MS
        # left - right in [-a, b]: a left row of the days meets right rows in [lo - b, hi + a),
        # a right row of the days left rows in [lo - a, hi + b).
        below, above = (window.a, window.b) if side == "left" else (window.b, window.a)
        column = F.col(layout.sides[side].inputs[firsts[0].name])
        return rows.where((column >= F.lit(lo - below)) & (column < F.lit(hi + above)))


def backfill(spark: SparkSession, step: IntervalJoinStep, root: str | JoinRoot, *, left_source: str,
             right_source: str, days: Sequence[str | dt.date],
             dry_run: bool = False) -> BackfillResult:
    """Recompute the join for `days` and replace exactly those days' output rows in one
    commit (with `dry_run`, only report what would change)."""
    return run_backfill(spark, step, IntervalBatchForm(step), root,
                        {"left": left_source, "right": right_source}, days, dry_run=dry_run)
