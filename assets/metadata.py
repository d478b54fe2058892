"""Materialization metadata a user needs to trust a run: what came in, what went out, where it is.

Every key is stable (the browser test and the nightly schedule read some of them back):
`delta_version`, `rows_in`, `rows_out`, `quarantined`, `stream_time`, `event_days_touched`,
`table_path`; an operator's own counters (`late_joined`, `still_buffered`, ...) and markdown
sections (`lateness`) come through under their own names.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dagster import MetadataValue

if TYPE_CHECKING:
    from joins.ingest import IngestSummary
    from joins.pipeline import BackfillSummary, RunSummary

STREAM_TIME = "stream_time"


def utc_text(ts_ms: int | None) -> str:
    if ts_ms is None:
        return "none yet"
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ts_ms)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def days_text(days: Sequence[str]) -> str:
    return ", ".join(days) if days else "none"


def _int(value: int | None) -> Any:
    return MetadataValue.int(value if value is not None else -1)


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
        STREAM_TIME: _int(last.stream_time),
        "stream_time_utc": MetadataValue.text(utc_text(last.stream_time)),
        "already_committed": MetadataValue.bool(all(s.skipped for s in summaries)),
        "table_path": MetadataValue.path(table_path),
        "quarantine_path": MetadataValue.path(quarantine_path),
        "landing": MetadataValue.path(landing),
    }


def microbatch_metadata(r: RunSummary, *, output_path: str) -> dict[str, Any]:
    def versions(v: tuple[int, int] | None) -> str:
        return "none" if v is None else f"v{v[0]}..v{v[1]}"

    out: dict[str, Any] = {
        "mode": MetadataValue.text("micro-batch"),
        "batch_id": _int(r.batch_id),
        "delta_version": _int(r.output_version),
        "rows_in": MetadataValue.int(r.rows_in_total),
        **{f"rows_in_{role}": MetadataValue.int(n) for role, n in r.rows_in.items()},
        "rows_out": MetadataValue.int(r.rows_out),
        "quarantined": MetadataValue.int(r.quarantined),
        **{name: MetadataValue.int(n) for name, n in r.counters.items()},
        STREAM_TIME: _int(r.stream_time),
        "stream_time_utc": MetadataValue.text(utc_text(r.stream_time)),
        "event_days_touched": MetadataValue.text(days_text(r.event_days_touched)),
        **{f"{role}_versions": MetadataValue.text(versions(v)) for role, v in r.input_versions.items()},
        **{name: MetadataValue.md(text) for name, text in r.details.items()},
        "table_path": MetadataValue.path(output_path),
    }
    if r.timings:
        out["latency_s"] = MetadataValue.float(round(sum(r.timings.values()), 3))
    return out


def backfill_metadata(r: BackfillSummary, *, output_path: str,
                      stream_time: int | None) -> dict[str, Any]:
    return {
        "mode": MetadataValue.text("backfill"),
        "delta_version": _int(r.output_version),
        "rows_in": MetadataValue.int(r.rows_in),
        "rows_out": MetadataValue.int(r.rows_out),
        "rows_before": MetadataValue.int(r.rows_before),
        "rows_added": MetadataValue.int(r.rows_added),
        "rows_removed": MetadataValue.int(r.rows_removed),
        "rows_changed": MetadataValue.int(r.rows_changed),
        "agrees_with_microbatches": MetadataValue.bool(r.agrees),
        **{name: MetadataValue.int(n) for name, n in r.counters.items()},
        STREAM_TIME: _int(stream_time),
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


def metadata_int(metadata: Mapping[str, Any], key: str) -> int | None:
    """An int metadata entry read back from an event (None when absent or a -1 placeholder)."""
    value = metadata.get(key)
    raw = getattr(value, "value", value)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        return None
    return raw
