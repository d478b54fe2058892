"""A versioned side's stream time and expiry at batch scale (seeds 000/002, `VersionedStore`).

A versioned store refuses a put older than its stream time minus history retention, where
stream time is the largest ts put before it, any key. Inside a micro-batch that is a running
max in arrival order across the whole batch, so it is decided set-wise:

- `side_clock` reads the batch's ts bounds from Delta statistics (no Spark job; one aggregate
  when the statistics cannot tell). Stream time after the batch is max(before, largest ts): an
  expired put is older than stream time, so counting it never moves the max. When even the
  oldest update is within retention of that, nothing can expire and no scan runs;
- otherwise `mark_expired` runs the prefix scan of `joins.versioned.prefix`
  (block maxima, a tiny carry on the driver, a window per block): each update gets the stream
  time it sees, and `_expired` is `ts < that - retention` (equal to the bound is stored).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.changelog.columns import ChangelogColumns
from joins.versioned.prefix import P_BEFORE, max_opt, prefix_stream_time

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.changelog.columns import TwoTableColumns
    from joins.changelog.result import Side
    from joins.incremental import StepContext

EXPIRED = "_expired"
ST_BEFORE = "_st_before"


@dataclass(frozen=True)
class SideClock:
    """One input of a batch: updates in, stream time before and after, whether any update may
    be beyond history retention, and the arrival span (lets the scan skip a job)."""

    rows: int | None
    before: int | None
    after: int | None
    may_expire: bool = False
    seq_span: tuple[int, int] | None = None


def stream_time_key(role: str) -> str:
    """The key of input `role`'s stream time in a batch's carry (what the next batch starts from)."""
    return f"{role}_stream_time"


def side_clock(ctx: StepContext, role: str, cols: ChangelogColumns, *, before: int | None,
               retention_ms: int | None) -> SideClock:
    """The clock of input `role` for this batch; `retention_ms` None = an unversioned side."""
    from pyspark.sql import functions as F

    if ctx.range(role).empty:
        return SideClock(0, before, before)
    stats = ctx.change_stats(role)
    known = stats is not None and stats.rows is not None and (
        stats.rows == 0 or (cols.ts in stats.min and cols.ts in stats.max))
    if known:
        assert stats is not None
        rows = stats.rows
        lo, hi = stats.min.get(cols.ts), stats.max.get(cols.ts)
        span = None
        if stats.min.get(cols.seq) is not None and stats.max.get(cols.seq) is not None:
            span = (int(stats.min[cols.seq]), int(stats.max[cols.seq]))
    else:
        row = ctx.changes(role).agg(
            F.count(F.lit(1)).alias("n"), F.min(cols.ts).alias("lo"), F.max(cols.ts).alias("hi"),
            F.min(cols.seq).alias("s0"), F.max(cols.seq).alias("s1")).first()
        assert row is not None
        rows, lo, hi = int(row["n"]), row["lo"], row["hi"]
        span = None if row["s0"] is None else (int(row["s0"]), int(row["s1"]))
    after = max_opt(before, None if hi is None else int(hi))
    may_expire = (retention_ms is not None and lo is not None and after is not None
                  and int(lo) < after - retention_ms)
    return SideClock(rows, before, after, may_expire, span)


def mark_expired(updates: DataFrame, cols: ChangelogColumns, clock: SideClock,
                 retention_ms: int | None) -> DataFrame:
    """`updates` plus EXPIRED (the store refuses it) and ST_BEFORE (the stream time it saw;
    null where no scan was needed)."""
    from pyspark.sql import functions as F

    if retention_ms is None or not clock.may_expire:
        return (updates.withColumn(EXPIRED, F.lit(False))
                .withColumn(ST_BEFORE, F.lit(None).cast("long")))
    scan = prefix_stream_time(updates, ts_col=cols.ts, seq_col=cols.seq,
                              stream_time_before=clock.before, seq_span=clock.seq_span)
    seen = F.col(P_BEFORE)
    expired = seen.isNotNull() & (F.col(cols.ts) < seen - F.lit(retention_ms))
    return (scan.frame.withColumn(EXPIRED, F.coalesce(expired, F.lit(False)))
            .withColumnRenamed(P_BEFORE, ST_BEFORE).drop("_block"))


def expired_reason(ts_col: str, retention_ms: int) -> Column:
    """The quarantine reason of an expired update, worded as the versioned table's ingest."""
    from pyspark.sql import functions as F

    from joins.spark.exprs import expired_reason_sql, ident

    return F.expr(expired_reason_sql(ident(ts_col), ident(ST_BEFORE), retention_ms))


def expired_rows(marked: DataFrame, side: str, cols: ChangelogColumns, values: Sequence[str], *,
                 retention_ms: int, batch_id: int) -> DataFrame:
    """The quarantine rows of a side's expired updates (`mark_expired`'s EXPIRED): side, key,
    ts, `_seq`, kind, reason, the stream time and retention that expired it, the value as
    JSON, `_batch_id`."""
    from pyspark.sql import functions as F

    record = F.to_json(F.struct(*(F.col(v) for v in values)))
    return marked.where(F.col(EXPIRED)).select(
        F.lit(side).alias("side"), F.col(cols.key).cast("string").alias("key"),
        F.col(cols.ts).cast("long").alias("ts"), F.col(cols.seq).cast("long").alias("_seq"),
        F.lit("expired").alias("kind"), expired_reason(cols.ts, retention_ms).alias("reason"),
        F.col(ST_BEFORE).alias("stream_time"),
        F.lit(retention_ms).cast("long").alias("history_retention_ms"),
        record.alias("record"), F.lit(batch_id).cast("long").alias("_batch_id"))


def both_sides(ctx: StepContext, cols: TwoTableColumns, retention: Callable[[Side], int | None],
               ) -> tuple[dict[Side, SideClock], dict[Side, DataFrame]]:
    """The batch's clock of each side of a two-sided table join, and each side's new updates
    marked with EXPIRED (a side with no new version is left out of the second)."""
    from joins.changelog.result import SIDES

    clocks: dict[Side, SideClock] = {}
    marked: dict[Side, DataFrame] = {}
    for side in SIDES:
        c = cols.changelog(side)
        clocks[side] = side_clock(ctx, side, c, before=ctx.carry.get(stream_time_key(side)),
                                  retention_ms=retention(side))
        if not ctx.range(side).empty:
            marked[side] = mark_expired(ctx.changes(side), c, clocks[side], retention(side))
    return clocks, marked
