"""A batch's new input rows and its watermark records.

Watermarks come two ways: explicit records in an input (a join's output carries its output
watermarks as rows with `_wm_key` / `_wm_ts`, a replay lands a scenario's watermark records so),
and derived ones: with an allowed lag for a side, each of its time columns gets the watermark
max event time seen - lag at the end of every batch (after all of the batch's rows).

Positions order a batch's rows and watermark records: `arrival` takes each input's `_order`
as one order for both inputs (the replay's arrival index); `left_first` puts every left row of
a batch before every right row, each input in its own `_order` (two tables have no common
arrival order; this is the micro-batch rule of the pipelines), then the derived watermarks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from joins.errors import InputRecordError
from joins.operators.interval_join.classify import BATCH, POS
from joins.operators.interval_join.columns import ORDER, SEQ, WM_KEY, WM_TS, JoinLayout, rename_side
from joins.operators.interval_join.timeline import END_POS, WatermarkEvent
from joins.sql import SIDES, ColumnRef, Side

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.incremental import StepContext

OrderMode = Literal["arrival", "left_first"]
RIGHT_OFFSET = 1 << 61
SOURCE = "interval_join input"


@dataclass(frozen=True)
class SideInput:
    """One side's new data rows (output names, `_seq`, POS, BATCH) and facts about them."""

    rows: DataFrame
    count: int | None          # from Delta statistics (None: unknown)
    max_seen: dict[ColumnRef, int]


def position(mode: OrderMode, side: Side, order: Column) -> Column:
    from pyspark.sql import functions as F

    if mode == "left_first" and side == "right":
        return order + F.lit(RIGHT_OFFSET)
    return order


def order_column(columns: list[str]) -> str:
    return ORDER if ORDER in columns else SEQ


def read_side(ctx: StepContext, layout: JoinLayout, side: Side, mode: OrderMode) -> tuple[
        DataFrame, bool]:
    """The batch's new data rows of `side`, and whether the input can hold watermark records."""
    from pyspark.sql import functions as F

    changes = ctx.changes(side)
    names = changes.columns
    marked = WM_KEY in names
    data = changes.where(F.col(WM_KEY).isNull()) if marked else changes
    rows = data.select(*rename_side(layout.sides[side]), F.col(SEQ).cast("long").alias(SEQ),
                       position(mode, side, F.col(order_column(names)).cast("long")).alias(POS),
                       F.lit(ctx.batch_id).cast("long").alias(BATCH))
    return rows, marked


def explicit_events(ctx: StepContext, layout: JoinLayout, marked: dict[Side, bool],
                    mode: OrderMode) -> list[WatermarkEvent]:
    """The watermark records of the batch's inputs (one small job when an input's statistics
    say it may hold some)."""
    from pyspark.sql import functions as F

    frames = []
    for side in SIDES:
        if not marked[side] or ctx.range(side).empty or not may_hold_watermarks(ctx, side):
            continue
        changes = ctx.changes(side)
        order = F.col(order_column(changes.columns)).cast("long")
        frames.append(changes.where(F.col(WM_KEY).isNotNull()).select(
            F.lit(side).alias("side"), position(mode, side, order).alias("pos"),
            F.col(SEQ).cast("long").alias("seq"), F.col(WM_KEY).alias("key"),
            F.col(WM_TS).cast("long").alias("ts")))
    if not frames:
        return []
    union = frames[0]
    for extra in frames[1:]:
        union = union.unionByName(extra)
    events = []
    for row in sorted(union.collect(), key=lambda r: (r["pos"], r["side"], r["seq"])):
        side: Side = row["side"]
        inverse = {col: name for name, col in layout.sides[side].inputs.items()}
        if row["key"] not in inverse or row["ts"] is None:
            raise InputRecordError(
                f"a watermark record must name a column of the {side} input "
                f"({sorted(inverse)}) and hold its value in {WM_TS}",
                index=row["seq"], field=WM_KEY, record=row.asDict(), source=SOURCE)
        events.append(WatermarkEvent(row["pos"], ColumnRef(side, inverse[row["key"]]),
                                     int(row["ts"])))
    return events


def may_hold_watermarks(ctx: StepContext, side: Side) -> bool:
    """Whether the batch's rows of `side` may hold a watermark record: not when the Delta
    statistics count as many nulls in its key column as rows (no job then)."""
    stats = ctx.change_stats(side)
    if stats is None or stats.rows is None or WM_KEY not in stats.nulls:
        return True
    return stats.nulls[WM_KEY] < stats.rows


def max_seen(ctx: StepContext, layout: JoinLayout, side: Side,
             before: dict[str, int]) -> dict[ColumnRef, int]:
    """Max event time seen so far per time column of `side` (Delta statistics; else one job)."""
    from pyspark.sql import functions as F

    columns = layout.time_columns(side)
    schema = layout.spec.plan.schema
    seen = {c: before[schema.watermark_name(c)] for c in columns
            if schema.watermark_name(c) in before}
    if ctx.range(side).empty or not columns:
        return seen
    inputs = layout.sides[side].inputs
    stats = ctx.change_stats(side)
    batch: dict[ColumnRef, int | None]
    if stats is not None and all(inputs[c.name] in stats.max for c in columns):
        batch = {c: stats.max[inputs[c.name]] for c in columns}
    else:
        row = ctx.changes(side).agg(*(F.max(inputs[c.name]).alias(str(n))
                                      for n, c in enumerate(columns))).first()
        assert row is not None
        batch = {c: row[str(n)] for n, c in enumerate(columns)}
    for column, value in batch.items():
        if value is not None:
            seen[column] = max(int(value), seen.get(column, int(value)))
    return seen


def derived_events(layout: JoinLayout, lag_ms: dict[Side, int | None],
                   seen: dict[Side, dict[ColumnRef, int]]) -> list[WatermarkEvent]:
    """One watermark per time column of each side with a lag, after every row of the batch,
    left columns first, config order."""
    schema = layout.spec.plan.schema
    events = []
    for side in SIDES:
        lag = lag_ms.get(side)
        if lag is None:
            continue
        for column in schema.ordered(seen[side]):
            events.append(WatermarkEvent(END_POS + len(events), column, seen[side][column] - lag,
                                         derived=True))
    return events


def batch_range(ctx: StepContext, layout: JoinLayout,
                 side: Side) -> tuple[dict[ColumnRef, int], dict[ColumnRef, int]]:
    """Min and max of `side`'s time columns over the batch's new rows (Delta statistics; empty
    when unknown, which reads the whole buffer)."""
    if ctx.range(side).empty:
        return {}, {}
    stats = ctx.change_stats(side)
    if stats is None:
        return {}, {}
    lo, hi = {}, {}
    for ref in layout.time_columns(side):
        column = layout.sides[side].inputs[ref.name]
        if stats.min.get(column) is not None and stats.max.get(column) is not None:
            lo[ref], hi[ref] = int(stats.min[column]), int(stats.max[column])
    return lo, hi
