"""Materialization metadata a user needs to trust a run: what came in, what went out, where it is.

Every key is stable (the browser test and the nightly schedule read some of them back):
`delta_version`, `rows_in`, `rows_out`, `quarantined`, `still_buffered`, `stream_time`,
`event_days_touched`, `lateness`, `table_path`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import MetadataValue

from assets.engine import BackfillSummary, Lateness, MicroBatchSummary
from joins.ingest import IngestSummary

STREAM_TIME = "stream_time"


def utc_text(ts_ms: int | None) -> str:
    if ts_ms is None:
        return "none yet"
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ts_ms)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


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


def lateness_markdown(lat: Lateness) -> str:
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


def days_text(days: Sequence[str]) -> str:
    return ", ".join(days) if days else "none"


def ingest_metadata(summaries: Sequence[IngestSummary], *, table_path: str, quarantine_path: str,
                    landing: str) -> dict[str, Any]:
    """Metadata of an ingest run (usually one batch; two when a crashed batch was resumed)."""
    last = summaries[-1]
    files = [f for s in summaries for f in s.files]
    return {
        "batch_id": MetadataValue.int(last.batch_id),
        "delta_version": MetadataValue.int(last.delta_version if last.delta_version is not None else -1),
        "files": MetadataValue.md("\n".join(f"- `{f}`" for f in files) or "none"),
        "rows_in": MetadataValue.int(sum(s.rows_in for s in summaries)),
        "stored": MetadataValue.int(sum(s.stored for s in summaries)),
        "expired": MetadataValue.int(sum(s.expired for s in summaries)),
        "quarantined": MetadataValue.int(sum(s.quarantined for s in summaries)),
        "bad_files": MetadataValue.md("\n".join(f"- `{f}`" for s in summaries for f in s.bad_files)
                                      or "none"),
        STREAM_TIME: MetadataValue.int(last.stream_time if last.stream_time is not None else -1),
        "stream_time_utc": MetadataValue.text(utc_text(last.stream_time)),
        "already_committed": MetadataValue.bool(all(s.skipped for s in summaries)),
        "table_path": MetadataValue.path(table_path),
        "quarantine_path": MetadataValue.path(quarantine_path),
        "landing": MetadataValue.path(landing),
    }


def microbatch_metadata(r: MicroBatchSummary, *, output_path: str,
                        output_version: int | None) -> dict[str, Any]:
    def versions(v: tuple[int, int] | None) -> str:
        return "none" if v is None else f"v{v[0]}..v{v[1]}"

    return {
        "mode": MetadataValue.text("micro-batch"),
        "batch_id": MetadataValue.int(r.batch_id if r.batch_id is not None else -1),
        "delta_version": MetadataValue.int(output_version if output_version is not None else -1),
        "rows_in": MetadataValue.int(r.rows_in),
        "rows_in_stream": MetadataValue.int(r.rows_in_stream),
        "rows_in_table": MetadataValue.int(r.rows_in_table or 0),
        "rows_out": MetadataValue.int(r.rows_out),
        "late_joined": MetadataValue.int(r.late_joined),
        "late_dropped": MetadataValue.int(r.late_dropped),
        "quarantined": MetadataValue.int(r.quarantined),
        "still_buffered": MetadataValue.int(r.still_buffered),
        STREAM_TIME: MetadataValue.int(r.stream_time if r.stream_time is not None else -1),
        "stream_time_utc": MetadataValue.text(utc_text(r.stream_time)),
        "table_stream_time_utc": MetadataValue.text(utc_text(r.table_stream_time)),
        "event_days_touched": MetadataValue.text(days_text(r.event_days_touched)),
        "stream_versions": MetadataValue.text(versions(r.stream_versions)),
        "table_versions": MetadataValue.text(versions(r.table_versions)),
        "lateness": MetadataValue.md(lateness_markdown(r.lateness)),
        "table_path": MetadataValue.path(output_path),
    }


def backfill_metadata(r: BackfillSummary, *, output_path: str,
                      stream_time: int | None) -> dict[str, Any]:
    return {
        "mode": MetadataValue.text("backfill"),
        "delta_version": MetadataValue.int(r.output_version if r.output_version is not None else -1),
        "rows_in": MetadataValue.int(r.rows_in),
        "rows_out": MetadataValue.int(r.rows_out),
        "rows_before": MetadataValue.int(r.rows_before),
        "rows_added": MetadataValue.int(r.rows_added),
        "rows_removed": MetadataValue.int(r.rows_removed),
        "rows_changed": MetadataValue.int(r.rows_changed),
        "agrees_with_microbatches": MetadataValue.bool(r.agrees),
        "still_buffered": MetadataValue.int(r.excluded_buffered),
        STREAM_TIME: MetadataValue.int(stream_time if stream_time is not None else -1),
        "stream_time_utc": MetadataValue.text(utc_text(stream_time)),
        "event_days_touched": MetadataValue.text(days_text(r.days)),
        "difference": MetadataValue.md(difference_markdown(r)),
        "table_path": MetadataValue.path(output_path),
    }


def difference_markdown(r: BackfillSummary) -> str:
    """Per event day: output rows before / after the backfill and what changed."""
    if not r.per_day:
        return "No event days in range."
    lines = ["| event day | rows before | rows after | added | removed | changed |",
             "|---|---:|---:|---:|---:|---:|"]
    for day, d in sorted(r.per_day.items()):
        lines.append(f"| {day} | {d['before']} | {d['after']} | {d['added']} | {d['removed']} | "
                     f"{d['changed']} |")
    if r.agrees:
        verdict = "The backfill reproduced the micro-batch output row for row."
    else:
        verdict = (f"The backfill corrected the micro-batch output: {r.rows_changed} row(s) changed, "
                   f"{r.rows_added} added, {r.rows_removed} removed (data arrived after the "
                   f"micro-batches had joined those records).")
    if r.excluded_buffered:
        verdict += (f" {r.excluded_buffered} record(s) still in the grace buffer were left to the "
                    f"next micro-batch.")
    return "\n".join([*lines, "", verdict])


def metadata_int(metadata: Mapping[str, Any], key: str) -> int | None:
    """An int metadata entry read back from an event (None when absent or a -1 placeholder)."""
    value = metadata.get(key)
    raw = getattr(value, "value", value)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        return None
    return raw
