"""Metadata people read on a run's materializations: what came in, what went out, where it is.

Counts on a partition's materialization are that partition's (a micro-batch writing to two event
days reports each day's rows on that day; the batch's totals carry a `batch_` prefix), times are
timestamps the UI shows as dates, and per-batch measures (`lateness_p95_s`, `watermark_lag_s`,
`latency_s`) are numbers, which Dagster plots over time. `dagster/row_count` and
`dagster/column_schema` are Dagster's own keys: rows in the table or partition after the run, and
its columns.

Stable keys (tests, the schedule and the browser test read some back): `delta_version`,
`rows_in`, `rows_out`, `stream_time`, `event_days_touched`, `table_path`, `mode`, `batch_id`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dagster import MetadataValue, TableColumn, TableSchema, TimestampMetadataValue

if TYPE_CHECKING:
    from joins.ingest import IngestSummary
    from joins.lake import TableSummary
    from joins.pipeline import BackfillSummary, DayDifference, RunSummary
    from joins.pipeline.observe import Progress

STREAM_TIME = "stream_time"
ROW_COUNT = "dagster/row_count"
COLUMN_SCHEMA = "dagster/column_schema"


def settings_metadata(settings: dict[str, Any]) -> dict[str, Any]:
    """A join's settings for its asset page: a duration in ms (`grace_ms`, ...) as a person
    reads it beside the configured number ("30 min (grace_ms 1800000)"); -1 means none."""
    from joins.core.human import duration

    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key.endswith("_ms") and isinstance(value, int) and not isinstance(value, bool):
            text = "none" if value < 0 else f"{duration(value)} ({key} {value})"
            out[key.removesuffix("_ms")] = MetadataValue.text(text)
        else:
            out[key] = value
    return out


def days_text(days: Sequence[str]) -> str:
    return ", ".join(days) if days else "none"


def event_time(ts_ms: int | None) -> Any:
    """An event time (ms) as a timestamp the UI renders as a date and time; text when unknown."""
    if ts_ms is None:
        return MetadataValue.text("none yet")
    return MetadataValue.timestamp(ts_ms / 1000)


def seconds(ms: int | None) -> Any:
    return MetadataValue.float(-1.0 if ms is None else round(ms / 1000, 3))


def _int(value: int | None) -> Any:
    return MetadataValue.int(value if value is not None else -1)


# What the UI says of the columns every operator's tables share; the rest are the user's own
# (named after the spec's columns) or, starting with `_`, the engine's lineage.
COLUMN_DESCRIPTIONS = {
    "ts": "event time, epoch milliseconds (UTC)",
    "ts_utc": "event time as a TIMESTAMP (UTC)",
    "event_date": "the UTC day of the event time: the Delta partition and the Dagster partition",
    "batch_id": "the micro-batch that wrote the row",
    "_batch_id": "the micro-batch that wrote the row",
    "tombstone": "a delete: the key has no value from this row's time on",
    "is_latest": "false for an out-of-order update, forwarded after a newer one (Kafka Streams' "
                 "versioned semantics)",
}
LINEAGE = ("lineage: the engine's bookkeeping (which input rows, which batch, the order it "
           "emitted them), what makes re-runs exactly once and replays comparable; not data")


def column_schema(schema: Any) -> Any:
    """A Spark StructType (a Delta table's schema) as Dagster's column schema, the shared and
    the lineage columns described."""
    def described(name: str) -> str | None:
        return COLUMN_DESCRIPTIONS.get(name) or (LINEAGE if name.startswith("_") else None)

    return MetadataValue.table_schema(TableSchema(columns=[
        TableColumn(name=f.name, type=f.dataType.simpleString(), description=described(f.name))
        for f in schema.fields]))


def table_metadata(summary: TableSummary | None, schema: Any | None) -> dict[str, Any]:
    """Row count and columns of a whole table after a run."""
    out: dict[str, Any] = {}
    if summary is not None and summary.rows is not None:
        out[ROW_COUNT] = MetadataValue.int(summary.rows)
    if schema is not None:
        out[COLUMN_SCHEMA] = column_schema(schema)
    return out


def ingest_metadata(summaries: Sequence[IngestSummary], *, table_path: str, quarantine_path: str,
                    landing: str) -> dict[str, Any]:
    """Metadata of an ingest run (usually one batch; two when a crashed batch was resumed)."""
    last = summaries[-1]
    files = [f for s in summaries for f in s.files]
    return {
        "batch_id": MetadataValue.int(last.batch_id),
        "delta_version": _int(last.delta_version),
        "files": MetadataValue.md("\n".join(f"- `{f}`" for f in files) or "none"),
        "rows_in": MetadataValue.int(sum(s.rows_in for s in summaries)),
        "stored": MetadataValue.int(sum(s.stored for s in summaries)),
        "expired": MetadataValue.int(sum(s.expired for s in summaries)),
        "quarantined": MetadataValue.int(sum(s.quarantined for s in summaries)),
        "bad_files": MetadataValue.md("\n".join(f"- `{f}`" for s in summaries for f in s.bad_files)
                                      or "none"),
        STREAM_TIME: event_time(last.stream_time),
        "already_committed": MetadataValue.bool(all(s.skipped for s in summaries)),
        "table_path": MetadataValue.path(table_path),
        "quarantine_path": MetadataValue.path(quarantine_path),
        "landing": MetadataValue.path(landing),
    }


def _versions(v: tuple[int, int] | None) -> str:
    return "none" if v is None else f"v{v[0]}..v{v[1]}"


def batch_metadata(r: RunSummary, *, output_path: str, progress: Progress | None) -> dict[str, Any]:
    """What a micro-batch did as a whole (its totals carry a `batch_` prefix)."""
    out: dict[str, Any] = {
        "mode": MetadataValue.text("micro-batch"),
        "batch_id": _int(r.batch_id),
        "delta_version": _int(r.output_version),
        "batch_rows_in": MetadataValue.int(r.rows_in_total),
        **{f"batch_rows_in_{role}": MetadataValue.int(n) for role, n in r.rows_in.items()},
        "batch_rows_out": MetadataValue.int(r.rows_out),
        "batch_quarantined": MetadataValue.int(r.quarantined),
        **{f"batch_{name}": MetadataValue.int(n) for name, n in r.counters.items()},
        **{f"batch_{name}": event_time(ms) for name, ms in r.times.items()},
        STREAM_TIME: event_time(r.stream_time),
        "event_days_touched": MetadataValue.text(days_text(r.event_days_touched)),
        **{f"{role}_versions": MetadataValue.text(_versions(v)) for role, v in r.input_versions.items()},
        **{name: MetadataValue.float(round(v, 3)) for name, v in r.series.items()},
        **{name: MetadataValue.md(text) for name, text in r.details.items()},
        "table_path": MetadataValue.path(output_path),
    }
    if progress is not None:
        out["watermark"] = event_time(progress.watermark)
        out["watermark_lag_s"] = seconds(progress.lag_ms)
    if r.timings:
        out["latency_s"] = MetadataValue.float(round(sum(r.timings.values()), 3))
    return out


# What identifies a micro-batch on each day's materialization; its other numbers are reported
# once per batch (an observation of the join asset), so that a plot per day or per event
# never repeats one batch's numbers under each day it wrote to.
BATCH_REFERENCE = ("batch_id", "delta_version")


def day_share(batch: dict[str, Any]) -> dict[str, Any]:
    """The part of a micro-batch's metadata that goes on each day's materialization: its
    references and descriptions (text, paths, times, tables), none of its numbers."""
    from dagster import FloatMetadataValue, IntMetadataValue

    return {k: v for k, v in batch.items()
            if k in BATCH_REFERENCE or not isinstance(v, IntMetadataValue | FloatMetadataValue)}


def day_metadata(day: str, *, written: int | None, rows_now: int | None) -> dict[str, Any]:
    """One event day's share of a micro-batch: the rows it wrote there and the day's rows now."""
    out = {"event_day": MetadataValue.text(day), "rows_out": _int(written)}
    if rows_now is not None:
        out[ROW_COUNT] = MetadataValue.int(rows_now)
    return out


def backfill_metadata(r: BackfillSummary, *, output_path: str,
                      stream_time: int | None) -> dict[str, Any]:
    """What a backfill run did as a whole (every partition of the run carries it)."""
    return {
        "mode": MetadataValue.text("backfill"),
        "delta_version": _int(r.output_version),
        "backfill_rows_in": MetadataValue.int(r.rows_in),
        "backfill_rows_out": MetadataValue.int(r.rows_out),
        "agrees_with_microbatches": MetadataValue.bool(r.agrees),
        **{f"backfill_{name}": MetadataValue.int(n) for name, n in r.counters.items()},
        STREAM_TIME: event_time(stream_time),
        "event_days_touched": MetadataValue.text(days_text(r.days)),
        "difference": MetadataValue.md(difference_markdown(r)),
        "table_path": MetadataValue.path(output_path),
    }


def backfill_day_metadata(day: str, d: DayDifference) -> dict[str, Any]:
    """One event day of a backfill: its rows before and after, and what changed."""
    return {
        "event_day": MetadataValue.text(day),
        "rows_out": MetadataValue.int(d.after),
        ROW_COUNT: MetadataValue.int(d.after),
        "rows_before": MetadataValue.int(d.before),
        "rows_added": MetadataValue.int(d.added),
        "rows_removed": MetadataValue.int(d.removed),
        "rows_changed": MetadataValue.int(d.changed),
        "day_agreed": MetadataValue.bool(d.agrees),
    }


def difference_markdown(r: BackfillSummary) -> str:
    """Per event day: output rows before / after the backfill and what changed."""
    if not r.per_day:
        return "No event days in range."
    lines = ["| event day | rows before | rows after | added | removed | changed |",
             "|---|---:|---:|---:|---:|---:|"]
    for day, d in sorted(r.per_day.items()):
        lines.append(f"| {day} | {d.before} | {d.after} | {d.added} | {d.removed} | {d.changed} |")
    if r.agrees:
        verdict = "The backfill reproduced the micro-batch output row for row."
    else:
        verdict = (f"The backfill corrected the micro-batch output: {r.rows_changed} row(s) changed, "
                   f"{r.rows_added} added, {r.rows_removed} removed (data arrived after the "
                   f"micro-batches had joined those records).")
    held = r.counters.get("still_buffered", 0)
    if held:
        verdict += f" {held} record(s) still held back by the join were left to the next micro-batch."
    return "\n".join([*lines, "", verdict])


def metadata_ms(metadata: Mapping[str, Any], key: str) -> int | None:
    """An event time read back from an event's metadata (a timestamp, or an int of ms); None
    when absent or unknown."""
    value = metadata.get(key)
    raw = getattr(value, "value", value)
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
        return None
    if isinstance(value, TimestampMetadataValue):
        return round(raw * 1000)
    return int(raw)
