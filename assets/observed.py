"""The parts of a pipeline that are not its tables but that people watch, as observable assets:

- `<source>_landing`: a landing folder (files landed, taken by an ingest, waiting); its data
  version is the set of landed files, so the source's table shows as unsynced while files wait;
- `<join>_quarantine`: every quarantine table of the pipeline (rows by source and reason, and
  the most recent rows with their reasons);
- `<join>_grace_buffer` (operators that hold records back): rows held, the oldest and newest held
  event time, the join's watermark and how far it trails the inputs.

Each has an observe function (the UI's "Observe" button, or a run of its job); the runs that
change them report observations too: ingest runs (landing, quarantine), micro-batches (buffer,
quarantine), the landing sensor's ticks (landing).
"""

import hashlib
from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSpec,
    DataVersion,
    MetadataValue,
    ObserveResult,
    OpExecutionContext,
    multi_observable_source_asset,
)

from assets.metadata import ROW_COUNT, event_time, seconds
from joins.pipeline import PipelineInput, PipelineLayout, PipelineSpec
from joins.pipeline.observe import LandingStatus, Progress, landing_status, progress
from joins.pipeline.spec import SourceLayout

PREVIEW_ROWS = 5


def landing_key(item: PipelineInput) -> AssetKey:
    assert item.source is not None, f"{item.role} reads {item.upstream}: no landing folder"
    return AssetKey([f"{item.source.name}_landing"])


def quarantine_key(spec: PipelineSpec) -> AssetKey:
    return AssetKey([f"{spec.name}_quarantine"])


def buffer_key(spec: PipelineSpec) -> AssetKey:
    return AssetKey([f"{spec.name}_grace_buffer"])


def landing_observation(layout: SourceLayout, item: PipelineInput) -> AssetObservation:
    status = landing_status(layout, item)
    return AssetObservation(asset_key=landing_key(item), metadata=landing_metadata(status),
                            tags=_version_tags(landing_version(status)))


def landing_version(status: LandingStatus) -> DataVersion:
    # File names are taken once (a corrected file lands under a new name): the names are the data.
    digest = hashlib.sha256(f"{status.files}:{status.newest_file}".encode()).hexdigest()[:16]
    return DataVersion(digest)


def _version_tags(version: DataVersion) -> dict[str, str]:
    return {"dagster/data_version": version.value}


def landing_metadata(status: LandingStatus) -> dict[str, Any]:
    waiting = "\n".join(f"- `{f}`" for f in status.pending[:20])
    if len(status.pending) > 20:
        waiting += f"\n- ... and {len(status.pending) - 20} more"
    return {
        "files": MetadataValue.int(status.files),
        "files_ingested": MetadataValue.int(status.taken),
        "files_waiting": MetadataValue.int(len(status.pending)),
        "files_quarantined_whole": MetadataValue.int(status.quarantined_files),
        "newest_file": MetadataValue.text(status.newest_file or "none"),
        "waiting": MetadataValue.md(
            "not known yet: the first ingest run resolves the catalog table's location"
            if status.unresolved else
            waiting or "nothing waits: every landed file was ingested"),
        "folder": MetadataValue.path(status.folder),
    }


def buffer_metadata(p: Progress) -> dict[str, Any]:
    return {
        ROW_COUNT: MetadataValue.int(p.held_rows or 0),
        "held_rows": MetadataValue.int(p.held_rows or 0),
        "oldest_held": event_time(p.oldest_held),
        "newest_held": event_time(p.newest_held),
        "stream_time": event_time(p.stream_time),
        "watermark": event_time(p.watermark),
        "newest_input": event_time(p.newest_input),
        "watermark_lag_s": seconds(p.lag_ms),
        "grace_s": seconds(p.hold_back_ms),
    }


def buffer_observation(layout: PipelineLayout, stream_time: int | None) -> AssetObservation | None:
    if layout.spec.held_back_table(layout) is None:
        return None
    return AssetObservation(asset_key=buffer_key(layout.spec),
                            metadata=buffer_metadata(progress(layout, stream_time)))


def quarantine_metadata(spark: Any, layout: PipelineLayout) -> dict[str, Any]:
    """Rows per quarantine table and reason, and the newest rows with their reasons (Spark: a
    few aggregates and a bounded read)."""
    from joins import audit

    counts = audit.quarantine_counts(spark, layout)
    recent = audit.recent_quarantined(spark, layout, per_table=PREVIEW_ROWS)
    by_table: dict[str, int] = {}
    for (where, _), n in counts.by_kind.items():
        by_table[where] = by_table.get(where, 0) + n
    kinds = ["| from | kind | rows |", "|---|---|---:|",
             *(f"| {w} | {k} | {n} |" for (w, k), n in sorted(counts.by_kind.items()))]
    lines = ["| from | batch | kind | record | reason |", "|---|---:|---|---|---|"]
    for row in recent:
        v = row.values
        record = str(v.get("record") or "")[:120].replace("|", "\\|")
        reason = str(v.get("reason") or "").replace("|", "\\|")
        lines.append(f"| {row.table} | {v.get('batch_id')} | {v.get('kind')} | `{record}` | {reason} |")
    return {
        ROW_COUNT: MetadataValue.int(counts.quarantined),
        "quarantined": MetadataValue.int(counts.quarantined),
        "rows_in": MetadataValue.int(counts.rows_in),
        "share": MetadataValue.float(round(counts.share, 6)),
        **{f"rows_from_{t}": MetadataValue.int(by_table.get(t, 0))
           for t in layout.quarantine_tables()},
        "by_reason": MetadataValue.md("\n".join(kinds) if counts.by_kind else "nothing quarantined"),
        "recent": MetadataValue.md("\n".join(lines) if recent else "nothing quarantined"),
    }


def quarantine_observation(spark: Any, layout: PipelineLayout) -> AssetObservation:
    return AssetObservation(asset_key=quarantine_key(layout.spec),
                            metadata=quarantine_metadata(spark, layout))


def observed_assets(spec: PipelineSpec, join_key: AssetKey) -> list[AssetsDefinition]:
    """The observable assets of one pipeline (see the module docstring; its sources' landing
    folders are the sources' own: `assets.sources`)."""
    out: list[AssetsDefinition] = []
    inputs = [AssetKey([i.name]) for i in spec.pipeline_inputs()]

    @multi_observable_source_asset(
        name=f"{spec.name}_observe_quarantine", group_name=spec.name,
        required_resource_keys={"spark", "lake"},
        specs=[AssetSpec(quarantine_key(spec), deps=[*inputs, join_key], kinds={"delta"},
                         description=f"Rows of `{spec.name}`'s inputs that were not stored or "
                                     f"joined, with the reason: bad rows, expired table updates, "
                                     f"late records. Observed each time an ingest or a "
                                     f"micro-batch quarantines rows: never observed means "
                                     f"nothing was quarantined yet.")])
    def _quarantine(context: OpExecutionContext) -> Iterator[ObserveResult]:
        layout = context.resources.lake.layout(spec)
        md = quarantine_metadata(context.resources.spark.session_for(context), layout)
        yield ObserveResult(asset_key=quarantine_key(spec), metadata=md)

    out.append(_quarantine)
    # Only an operator whose held-back records sit in one table of event rows has this view.
    if spec.held_back_table(PipelineLayout("", spec)) is not None:
        stream = [AssetKey([i.name]) for i in spec.pipeline_inputs() if i.kind == "events"]

        @multi_observable_source_asset(
            name=f"{spec.name}_observe_grace_buffer", group_name=spec.name,
            required_resource_keys={"lake"},
            specs=[AssetSpec(buffer_key(spec), deps=stream or inputs, kinds={"delta"},
                             description=f"Records `{spec.name}` holds back for out-of-order data "
                                         f"(grace {spec.hold_back_ms() // 1000} s) until stream "
                                         f"time passes them.")])
        def _buffer(context: OpExecutionContext) -> Iterator[ObserveResult]:
            layout = context.resources.lake.layout(spec)
            stream_time = spec.engine(layout).stream_time()
            yield ObserveResult(asset_key=buffer_key(spec),
                                metadata=buffer_metadata(progress(layout, stream_time)))

        out.append(_buffer)
    return out
