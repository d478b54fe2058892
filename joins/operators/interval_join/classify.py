"""What the reference processor does with each new row of a batch, as Spark columns.

A row at position p lies in segment s (the number of watermark records before it, see
`timeline.py`) and sees that segment's watermarks. In the reference's order of checks it is:

- `invalid`: a time column (in a bound, or watermarked) is null: quarantined with the reason
  (the reference refuses such a record: it cannot tell where the row belongs in time);
- `late`: a time column below its last received watermark: dropped and counted, or quarantined
  (`late: quarantine`) with the reason `spec.LATE_REASON`;
- `filtered`: its side's one-input conjuncts are not TRUE: never buffered, null-padded at once if
  its side is outer;
- `out_of_bounds`: a bounded column below its lower bound: joined with the opposite buffer, not
  buffered (null-padded at once if outer and unmatched);
- `buffered`: joined with the opposite buffer and buffered, until the first watermark record
  that lifts a lower bound above one of its times evicts it (`_evict`: that record's index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.errors import ConfigError
from joins.operators.interval_join.spec import LATE_REASON
from joins.spark.exprs import duration_sql, ident, iso_time_sql, sql_string
from joins.sql import ColumnRef, Side

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.interval_join.columns import JoinLayout
    from joins.operators.interval_join.timeline import Timeline

POS, BATCH, SEG, EVICT, USED0, CLASS, WHY = "_pos", "_batch", "_seg", "_evict", "_used0", "_class", "_why"
INVALID, LATE, FILTERED, OOB, BUFFERED = "invalid", "late", "filtered", "out_of_bounds", "buffered"
CLASSES = (INVALID, LATE, FILTERED, OOB, BUFFERED)


def segment_of(positions: list[int]) -> Column:
    """The segment of a row: how many watermark records come before its position."""
    from pyspark.sql import functions as F

    if not positions:
        return F.lit(0).cast("long")
    expr = F.when(F.col(POS) < F.lit(positions[0]), F.lit(0))
    for s, pos in enumerate(positions[1:], start=1):
        expr = expr.when(F.col(POS) < F.lit(pos), F.lit(s))
    return expr.otherwise(F.lit(len(positions))).cast("long")


def per_segment(values: list[int | None]) -> Column:
    """A per-segment value (null where there is none yet) for the row's SEG."""
    from pyspark.sql import functions as F

    return F.expr(per_segment_sql(values))


def per_segment_sql(values: list[int | None]) -> str:
    """`per_segment` as SQL text (a BIGINT expression)."""
    if len(set(values)) == 1:
        return f"CAST({'NULL' if values[0] is None else int(values[0])} AS BIGINT)"
    cases = " ".join(f"WHEN {SEG} = {s} THEN {int(v)}" for s, v in enumerate(values) if v is not None)
    return f"CAST(CASE {cases} END AS BIGINT)"


def watched_columns(layout: JoinLayout, side: Side, timeline: Timeline) -> list[ColumnRef]:
    """The columns of `side` that must hold a time: in a bound, or watermarked in the batch."""
    schema = layout.spec.plan.schema
    marked = {c for seg in timeline.segments for c in seg.watermarked if c.side == side}
    columns = schema.ordered({*layout.time_columns(side), *marked})
    for ref in columns:
        if layout.sides[side].kinds.get(ref.name) != "long":
            raise ConfigError(f"interval_join: {side} column {ref.name!r} holds watermarks or is "
                              f"in a time bound, so it needs integer milliseconds (a long column)")
    return columns


@dataclass
class Checks:
    """A side's checks in the reference's order, as Spark columns over classified rows.

    invalid, late: (condition, its quarantine reason) per watched column, each condition true or
    false, never null; the reasons are built only when asked (`reasons=True`): analysing their
    text costs more than a small batch's classification, and only a batch that quarantines reads
    them. oob: one condition per bounded column."""

    invalid: list[tuple[Column, Column | None]]
    late: list[tuple[Column, Column | None]]
    oob: list[Column]


def checks(layout: JoinLayout, side: Side, timeline: Timeline, *, reasons: bool) -> Checks:
    from pyspark.sql import functions as F

    schema = layout.spec.plan.schema
    watched = watched_columns(layout, side, timeline)
    bounded = set(layout.bounded_columns(side))
    time_cols = set(layout.time_columns(side))
    out = Checks([], [], [])
    for ref in watched:
        col = F.col(layout.ref(ref))
        received_sql = per_segment_sql([seg.received.get(ref) for seg in timeline.segments])
        received = F.expr(received_sql)
        need = F.lit(True) if ref in time_cols else received.isNotNull()
        name = schema.watermark_name(ref)
        out.invalid.append((col.isNull() & need, F.lit(
            f"missing time column {name}: every {side} row needs an integer (milliseconds) "
            "there") if reasons else None))
        out.late.append((F.coalesce(col < received, F.lit(False)), late_reason_column(
            side, name, ident(layout.ref(ref)), received_sql) if reasons else None))
        if ref in bounded:
            out.oob.append(col < per_segment([seg.floors.get(ref) for seg in timeline.segments]))
    return out


def classify(rows: DataFrame, layout: JoinLayout, side: Side, timeline: Timeline) -> DataFrame:
    """`rows` (output names, POS) with SEG and CLASS."""
    from pyspark.sql import functions as F

    frame = rows.withColumn(SEG, segment_of(timeline.positions))
    found = checks(layout, side, timeline, reasons=False)
    flt = layout.filter(side)
    klass = F.lit(BUFFERED)
    is_oob = F.lit(False)
    for cond in found.oob:
        is_oob = is_oob | F.coalesce(cond, F.lit(False))
    klass = F.when(is_oob, F.lit(OOB)).otherwise(klass)
    if flt is not None:
        klass = F.when(~F.coalesce(flt, F.lit(False)), F.lit(FILTERED)).otherwise(klass)
    for cond, _ in reversed(found.late):
        klass = F.when(cond, F.lit(LATE)).otherwise(klass)
    for cond, _ in reversed(found.invalid):
        klass = F.when(cond, F.lit(INVALID)).otherwise(klass)
    return frame.withColumn(CLASS, klass)


def with_reasons(classified: DataFrame, layout: JoinLayout, side: Side,
                 timeline: Timeline) -> DataFrame:
    """`classify`'s rows with WHY: the quarantine reason of an invalid or late row (the first
    check it fails, in the order `classify` applies them), null for the others."""
    from pyspark.sql import functions as F

    found = checks(layout, side, timeline, reasons=True)
    why = F.lit(None).cast("string")
    for cond, reason in reversed(found.late):
        why = F.when(cond, reason).otherwise(why)
    for cond, reason in reversed(found.invalid):
        why = F.when(cond, reason).otherwise(why)
    return classified.withColumn(WHY, why)


def evict_index(layout: JoinLayout, side: Side, timeline: Timeline) -> Column:
    """The index of the watermark record that evicts a buffered row of `side` (null: it stays):
    the first one after which a lower bound exceeds one of the row's bounded times."""
    from pyspark.sql import functions as F

    bounded = layout.bounded_columns(side)
    expr = None
    for q, floors in timeline.evictions:
        cond = F.lit(False)
        for ref in bounded:
            if ref in floors:
                cond = cond | (F.col(layout.ref(ref)) < F.lit(floors[ref]))
        expr = F.when(cond, F.lit(q)) if expr is None else expr.when(cond, F.lit(q))
    return (F.lit(None) if expr is None else expr).cast("long")


def live(layout: JoinLayout, side: Side, floors: dict[ColumnRef, int]) -> Column:
    """Rows of `side` still buffered under these lower bounds (every bounded time at or above)."""
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for ref in layout.bounded_columns(side):
        if ref in floors:
            cond = cond & (F.col(layout.ref(ref)) >= F.lit(floors[ref]))
    return cond


def late_reason_column(side: str, name: str, value_sql: str, watermark_sql: str) -> Column:
    """`spec.late_reason` as a Spark expression (the row's time and its watermark as SQL text
    of BIGINTs): the same text, times in ISO UTC."""
    from pyspark.sql import functions as F

    # The template's text between its fields as literals, its fields as SQL.
    pieces = LATE_REASON.replace("{side}", side).replace("{column}", name).split("{")
    fields = {"value": iso_time_sql(value_sql), "watermark": iso_time_sql(watermark_sql),
              "behind": duration_sql(f"({watermark_sql}) - ({value_sql})")}
    parts = [sql_string(pieces[0])]
    for piece in pieces[1:]:
        field, rest = piece.split("}", 1)
        parts += [fields[field], sql_string(rest)]
    return F.expr(f"concat({', '.join(parts)})")
