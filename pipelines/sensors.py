"""Sensors: ingest landing files as they land, run a join micro-batch when an input changed.

Both sensors only list files or read Delta logs (no Spark), so a tick costs milliseconds. Every
tick that requests nothing says why, in the tick's skip reason.

- `<source>_landing_sensor`: cursor = the landing file names already requested; a new file set
  gets one run whose run key is derived from the set (a tick re-evaluated with the same cursor
  asks for the same run key, which Dagster de-duplicates). The run ingests exactly those files
  (see `joins.ingest`: a file is ingested once, whatever asks for it). While an ingest run of
  the source is queued or running (a run of its ingest job, or any ingest holding the source's
  lease), nothing is requested and the cursor stays: the new files go into the next run.
- `<join>_microbatch_sensor`: cursor = the (stream, table) Delta versions the last requested
  micro-batch will consume; a new version of either input requests the next micro-batch, run
  key = the version pair. While a micro-batch runs, no other is requested (they would contend
  for the same state; the engine would refuse the second).
"""

import hashlib
import json
from typing import TYPE_CHECKING, Any

from dagster import (
    DagsterRunStatus,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from assets import engine
from assets.factory import MODE_MICROBATCH, MODE_TAG, JoinAssets
from assets.layout import JoinLayout
from assets.specs import SourceSpec
from joins.ingest import ingest_in_progress, list_landing
from resources import LakeResource

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

ACTIVE = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
          DagsterRunStatus.STARTED]


def _load_cursor(cursor: str | None) -> dict[str, Any]:
    if not cursor:
        return {}
    try:
        loaded = json.loads(cursor)
    except json.JSONDecodeError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def landing_run_key(source: str, files: list[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:16]
    return f"{source}:{len(files)}-files:{digest}"


def landing_sensor(ja: JoinAssets, source: SourceSpec,
                   job: "UnresolvedAssetJobDefinition") -> SensorDefinition:
    spec = ja.spec
    op_name = ja.source_asset(source).op.name

    @sensor(name=f"{source.name}_landing_sensor", job=job,
            minimum_interval_seconds=spec.sensor_interval_s,
            description=f"Ingests new files of the `{source.name}` landing folder.")
    def _landing(context: SensorEvaluationContext, lake: LakeResource) -> RunRequest | SkipReason:
        layout = JoinLayout.of(lake, spec)
        folder = layout.landing(source)
        seen = set(_load_cursor(context.cursor).get("files", []))
        new = [f for f in list_landing(folder) if f not in seen]
        if not new:
            return SkipReason(f"no new files in {folder}")
        running = context.instance.get_runs(RunsFilter(job_name=job.name, statuses=ACTIVE), limit=1)
        if running:
            return SkipReason(f"ingest run {running[0].run_id[:8]} of {source.name} is queued or "
                              f"running; {len(new)} new file(s) go into the next run")
        holder = ingest_in_progress(layout.ingest_source(source))
        if holder is not None:
            return SkipReason(f"an ingest of {source.name} is running ({holder.describe(_now_ms())}); "
                              f"{len(new)} new file(s) go into the next run")
        context.update_cursor(json.dumps({"files": sorted(seen | set(new))}))
        return RunRequest(
            run_key=landing_run_key(source.name, new),
            run_config={"ops": {op_name: {"config": {"files": new}}}},
            tags={"tj/source": source.name, "tj/new_files": str(len(new))})

    return _landing


def microbatch_sensor(ja: JoinAssets) -> SensorDefinition:
    spec = ja.spec

    @sensor(name=f"{spec.name}_microbatch_sensor", job=ja.microbatch_job,
            minimum_interval_seconds=spec.sensor_interval_s,
            description=f"Runs the next micro-batch of `{spec.name}` when `{spec.stream.name}` or "
                        f"`{spec.table.name}` has a new Delta version.")
    def _microbatch(context: SensorEvaluationContext, lake: LakeResource) -> RunRequest | SkipReason:
        layout = JoinLayout.of(lake, spec)
        stream_v = engine.delta_version(layout.stream_events)
        table_v = engine.delta_version(layout.table_versions)
        missing = [name for name, v in ((spec.stream.name, stream_v), (spec.table.name, table_v))
                   if v is None]
        if stream_v is None or table_v is None:
            return SkipReason(f"waiting for {' and '.join(missing)}: no Delta table yet (nothing "
                              f"ingested from its landing folder)")
        consumed = _load_cursor(context.cursor)
        if consumed.get("stream") == stream_v and consumed.get("table") == table_v:
            return SkipReason(f"stream at v{stream_v}, table at v{table_v}: nothing new since the "
                              f"last batch")
        running = context.instance.get_runs(
            RunsFilter(job_name=ja.microbatch_job_name, statuses=ACTIVE), limit=1)
        if running:
            return SkipReason(f"micro-batch run {running[0].run_id[:8]} is still in progress; stream "
                              f"v{stream_v} / table v{table_v} go into the next batch")
        context.update_cursor(json.dumps({"stream": stream_v, "table": table_v}))
        return RunRequest(
            run_key=f"{spec.name}:stream-v{stream_v}:table-v{table_v}",
            tags={MODE_TAG: MODE_MICROBATCH, "tj/stream_version": str(stream_v),
                  "tj/table_version": str(table_v)})

    return _microbatch
