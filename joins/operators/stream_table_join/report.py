"""What one micro-batch of the stream-table join reports, and the lateness statistics in it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from joins.spark.exprs import count_if, ident

if TYPE_CHECKING:
    from pyspark.sql import Column

# Upper bounds (ms) of the lateness histogram buckets; the last bucket is open.
LATENESS_BUCKETS_MS: tuple[int, ...] = (0, 1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)


@dataclass(frozen=True)
class LatenessStats:
    """How far behind the buffer's stream time the batch's records arrived: stream time seen on
    arrival minus ts, 0 for a record that advanced stream time. `histogram` pairs a bucket label
    with a count (labels: `<=0ms`, `<=1000ms`, ..., `>86400000ms`)."""

    records: int = 0
    max_ms: int | None = None
    p50_ms: int | None = None
    p95_ms: int | None = None
    p99_ms: int | None = None
    histogram: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class MicroBatchReport:
    """What one micro-batch did (or, with `skipped`, that it had nothing to do)."""

    batch_id: int | None
    skipped: bool = False
    skip_reason: str | None = None
    stream_versions: tuple[int, int] | None = None   # source Delta versions consumed
    table_versions: tuple[int, int] | None = None
    table_version: int | None = None                 # the pinned table version of the lookups
    commits: dict[str, int | None] = field(default_factory=dict)  # table -> Delta version written
    rows_in_stream: int = 0
    rows_in_table: int | None = 0
    rows_out: int = 0
    evicted: int = 0
    late_joined: int = 0
    late_dropped: int = 0
    quarantined: int = 0
    skipped_null_value: int = 0
    skipped_null_key: int = 0
    inner_unmatched: int = 0
    lookup_beyond_history_retention: int = 0
    still_buffered: int = 0
    stream_time: int | None = None
    table_stream_time: int | None = None
    event_days_touched: tuple[str, ...] = ()
    lateness: LatenessStats = field(default_factory=LatenessStats)
    # Wall time per phase of the batch (seconds): where a micro-batch's latency goes.
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def rows_in(self) -> tuple[int, int | None]:
        return self.rows_in_stream, self.rows_in_table

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], **overrides: Any) -> MicroBatchReport:
        data = dict(raw)
        lat = data.pop("lateness", None) or {}
        lateness = LatenessStats(**{**lat, "histogram": tuple(tuple(h) for h in lat.get("histogram", ()))})
        for name in ("stream_versions", "table_versions"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        data["event_days_touched"] = tuple(data.get("event_days_touched", ()))
        data.update(overrides)
        return cls(**data, lateness=lateness)


def lateness_columns(lateness: str, eligible: str) -> dict[str, Column]:
    """Aggregates of the lateness of the `eligible` rows, by name (see `lateness_stats`);
    `lateness` and `eligible` are SQL expressions (one JVM call per aggregate)."""
    from pyspark.sql import functions as F

    value = f"(CASE WHEN {eligible} THEN coalesce({lateness}, 0) END)"
    out = {"lat_n": F.expr(f"count({value})"), "lat_max": F.expr(f"max({value})"),
           "lat_pct": F.expr(f"percentile_approx({value}, array(0.5D, 0.95D, 0.99D))")}
    lower: int | None = None
    for upper in LATENESS_BUCKETS_MS:
        cond = f"{value} <= {upper}" if lower is None else f"{value} > {lower} AND {value} <= {upper}"
        out[f"lat_le_{upper}"] = count_if(cond)
        lower = upper
    out["lat_gt"] = count_if(f"{value} > {lower}")
    return out


def lateness_stats(row: Any) -> LatenessStats:
    n = int(row["lat_n"] or 0)
    if n == 0:
        return LatenessStats()
    pct = row["lat_pct"] or [None, None, None]
    hist = [(f"<={b}ms", int(row[f"lat_le_{b}"] or 0)) for b in LATENESS_BUCKETS_MS]
    hist.append((f">{LATENESS_BUCKETS_MS[-1]}ms", int(row["lat_gt"] or 0)))
    return LatenessStats(records=n, max_ms=int(row["lat_max"]),
                         p50_ms=None if pct[0] is None else int(pct[0]),
                         p95_ms=None if pct[1] is None else int(pct[1]),
                         p99_ms=None if pct[2] is None else int(pct[2]),
                         histogram=tuple(hist))


def _ms_text(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms >= 3_600_000:
        return f"{ms / 3_600_000:.1f} h"
    if ms >= 60_000:
        return f"{ms / 60_000:.1f} min"
    if ms >= 1000:
        return f"{ms / 1000:.1f} s"
    return f"{ms} ms"


def lateness_series(lat: LatenessStats) -> dict[str, float]:
    """The batch's lateness percentiles in seconds, to plot over batches (none without records)."""
    named = {"lateness_p50_s": lat.p50_ms, "lateness_p95_s": lat.p95_ms, "lateness_max_s": lat.max_ms}
    return {k: v / 1000 for k, v in named.items() if v is not None}


def lateness_markdown(lat: LatenessStats) -> str:
    """A small table: percentiles, then a text histogram of how late records arrived."""
    if lat.records == 0:
        return "No stream records in this batch."
    lines = [
        f"**{lat.records} stream records**: p50 {_ms_text(lat.p50_ms)}, p95 {_ms_text(lat.p95_ms)}, "
        f"p99 {_ms_text(lat.p99_ms)}, max {_ms_text(lat.max_ms)} behind stream time",
        "",
        "| lateness | records | |",
        "|---|---:|---|",
    ]
    peak = max((n for _, n in lat.histogram), default=0)
    for label, n in lat.histogram:
        bar = "█" * (round(20 * n / peak) if peak else 0)
        lines.append(f"| {label} | {n} | {bar} |")
    return "\n".join(lines)


# Metrics of a decision beyond the counts: its stream time after the batch (with the stream
# time before it), the first record not skipped that has no ts (the step refuses it), and the
# smallest ts looked up in the table (a held window of the table answers lookups from its start).
MAX_ELIGIBLE, NULL_TS_SEQ, MIN_JOIN_TS = "max_eligible_ts", "null_ts_seq", "min_join_ts"


def max_eligible_metric(ts: str) -> Column:
    """The largest ts of the records not skipped (late records never raise stream time)."""
    from pyspark.sql import functions as F

    from joins.operators.stream_table_join.grace import ELIGIBLE_SQL

    return F.expr(f"max(CASE WHEN {ELIGIBLE_SQL} THEN {ident(ts)} END)")


def decision_metrics(ts: str, seq: str) -> dict[str, Column]:
    """A batch's counts over `Decision.decided`'s new records: `n`, one per class, the
    lateness of the records that were not skipped, MAX_ELIGIBLE and NULL_TS_SEQ; and over all
    its records (buffered ones released too) MIN_JOIN_TS."""
    from pyspark.sql import functions as F

    from joins.operators.stream_table_join.grace import (
        CLASS,
        CLASSES,
        ELIGIBLE_SQL,
        FATE,
        JOIN_FATE,
        P_BEFORE,
    )

    metrics = {"n": F.expr(f"count({CLASS})")}  # buffered records have no class
    metrics.update({c: count_if(f"{CLASS} = {c!r}") for c in CLASSES})
    metrics.update(lateness_columns(f"greatest({P_BEFORE} - {ident(ts)}, 0)", ELIGIBLE_SQL))
    metrics[MAX_ELIGIBLE] = max_eligible_metric(ts)
    metrics[NULL_TS_SEQ] = F.expr(f"min(CASE WHEN {ident(ts)} IS NULL AND {ELIGIBLE_SQL} "
                                  f"THEN {ident(seq)} END)")
    metrics[MIN_JOIN_TS] = F.expr(f"min(CASE WHEN {FATE} = '{JOIN_FATE}' THEN {ident(ts)} END)")
    return metrics


def no_records_counts() -> dict[str, Any]:
    """`decision_metrics` over a batch without new stream records, as Spark's aggregates give
    them over no rows (counts 0, the rest null), without a job to compute them."""
    from joins.operators.stream_table_join.grace import CLASSES

    counts: dict[str, Any] = {"n": 0, **dict.fromkeys(CLASSES, 0), "lat_n": 0, "lat_max": None,
                              "lat_pct": None, "lat_gt": 0}
    counts.update({f"lat_le_{upper}": 0 for upper in LATENESS_BUCKETS_MS})
    counts.update(dict.fromkeys((MAX_ELIGIBLE, NULL_TS_SEQ, MIN_JOIN_TS)))
    return counts
