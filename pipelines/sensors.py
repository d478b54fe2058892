"""Sensors: ingest landing files as they land, run a join micro-batch when an input changed.

Both sensors only list files or read Delta logs (no Spark), so a tick costs milliseconds. Every
tick that requests nothing says why, in the tick's skip reason.

- `<source>_landing_sensor`: the files to ingest are those landed that no ingest batch has
  taken (the source's batch log says which) and that no earlier tick requested; the cursor
  keeps only the requested files not taken yet and the last name requested, so it stays small
  however many files the folder ever held, and a file landed under a name that sorts before
  the last one is still found. A new file set gets one run whose run key is derived from the
  set (a tick re-evaluated with the same cursor asks for the same run key, which Dagster
  de-duplicates). No run is requested while an ingest of the source is queued or running (its
  lease says so); the new files go into the next one.
- `<join>_microbatch_sensor`: cursor = the input Delta versions the last requested micro-batch
  will consume; a new version of any input requests the next micro-batch, run key = the
  versions. While a micro-batch runs, no other is requested (the join's writer lease would make
  the second wait anyway).

A failed run is re-executed by Dagster's daemon (`run_retries`, runplatform/instance.py): what
it was given is no longer new to its sensor. Once its retries are spent, the skip reasons name it.
"""

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from dagster import (
    DagsterRunStatus,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from assets.factory import MODE_MICROBATCH, MODE_TAG, PipelineAssets, layout_of
from assets.observed import landing_observation
from assets.sources import SourceAssets
from joins import lake as delta
from resources import LakeResource

if TYPE_CHECKING:
    from dagster import DagsterRun

    from resources.dagster_private import UnresolvedAssetJobDefinition

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


# How many of an ingest job's latest failed or canceled runs the landing sensor looks through
# for the one given a waiting file (a run re-executed twice fails three times).
STOPPED_RUNS = 20


def active_run(context: SensorEvaluationContext, job_name: str) -> "DagsterRun | None":
    """A queued or running run of the job, if any."""
    runs = context.instance.get_runs(RunsFilter(job_name=job_name, statuses=ACTIVE), limit=1)
    return runs[0] if runs else None


# Runs that ended without doing their work: what they were given waits for a re-execution.
STOPPED = [DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]


def _stopped_last_run(context: SensorEvaluationContext, job_name: str) -> "DagsterRun | None":
    """The job's latest run if it failed or was canceled: what it was to process is no longer
    new to the sensor, so only its re-execution (Dagster's run retries, or a user's) processes
    it."""
    runs = context.instance.get_runs(RunsFilter(job_name=job_name), limit=1)
    return runs[0] if runs and runs[0].status in STOPPED else None


def _stopped_run_of(context: SensorEvaluationContext, job_name: str, op_name: str,
                    files: list[str]) -> "DagsterRun | None":
    """The latest failed or canceled ingest run given any of `files` (requested, not taken),
    unless a run of
    the job is active: later runs that succeeded were given other files, so the latest run alone
    does not say whether these wait."""
    if active_run(context, job_name) is not None:
        return None
    wanted = set(files)
    for run in context.instance.get_runs(
            RunsFilter(job_name=job_name, statuses=STOPPED), limit=STOPPED_RUNS):
        given = run.run_config.get("ops", {}).get(op_name, {}).get("config", {}).get("files", [])
        if wanted.intersection(given):
            return run
    return None


def _stopped(run: "DagsterRun") -> str:
    from resources.dagster_private import WILL_RETRY_TAG

    if run.status == DagsterRunStatus.CANCELED:
        # Run retries re-execute failures only: a canceled run's work waits for a person.
        return f"run {run.run_id[:8]} was canceled; re-execute it from its run page"
    if run.tags.get(WILL_RETRY_TAG) == "true":
        return f"run {run.run_id[:8]} failed; Dagster re-executes it (run_retries)"
    return (f"run {run.run_id[:8]} failed and is not retried again; re-execute it from its run "
            f"page once its error is fixed")


def landing_run_key(source: str, files: list[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:16]
    return f"{source}:{len(files)}-files:{digest}"


def landing_sensor(sa: SourceAssets, job: "UnresolvedAssetJobDefinition", *,
                   interval_s: int) -> SensorDefinition:
    item, source = sa.item, sa.item.source
    assert source is not None
    op_name = sa.table.op.name

    @sensor(name=f"{source.name}_landing_sensor", job=job, minimum_interval_seconds=interval_s,
            description=f"Ingests new files of the `{source.name}` landing folder.")
    def _landing(context: SensorEvaluationContext, lake: LakeResource) -> SensorResult | SkipReason:
        from joins.ingest import ingest_in_progress
        from joins.pipeline.observe import landing_status

        layout = lake.sources()
        folder = layout.landing(source)
        cursor = _load_cursor(context.cursor)
        status = landing_status(layout, item)
        if status.unresolved:
            return _resolving_run(context, job, source.name, op_name)
        pending = status.pending       # landed, not taken by an ingest
        waiting = set(pending)
        in_flight = [f for f in cursor.get("in_flight", []) if f in waiting]
        requested = set(in_flight)
        new = [f for f in pending if f not in requested]
        if not new:
            stopped = _stopped_run_of(context, job.name, op_name, in_flight) if in_flight else None
            return SkipReason(f"no new files in {folder}" + (
                f"; {len(in_flight)} requested file(s) not ingested: {_stopped(stopped)}"
                if stopped is not None else ""))
        running = active_run(context, job.name)
        if running is not None:
            return SkipReason(f"ingest run {running.run_id[:8]} of {source.name} is queued or "
                              f"running; {len(new)} new file(s) go into the next run")
        holder = ingest_in_progress(layout.ingest_source(item))
        if holder is not None:
            return SkipReason(f"an ingest of {source.name} is running "
                              f"({holder.describe(int(time.time() * 1000))}); {len(new)} new "
                              f"file(s) go into the next run")
        request = RunRequest(
            run_key=landing_run_key(source.name, new),
            run_config={"ops": {op_name: {"config": {"files": new}}}},
            tags={"tj/source": source.name, "tj/new_files": str(len(new))})
        # The landing folder's asset shows the files waiting for this run.
        through = max([*new, *([cursor["through"]] if cursor.get("through") else [])])
        return SensorResult(run_requests=[request], asset_events=[landing_observation(layout, item)],
                            cursor=json.dumps({"through": through,
                                               "in_flight": sorted({*in_flight, *new})}))

    return _landing


# While a catalog-named source is unresolved, one run in this many seconds asks for it (a run
# whose name does not resolve fails, naming why; the next one retries).
RESOLVE_RETRY_S = 600


def _resolving_run(context: SensorEvaluationContext, job: "UnresolvedAssetJobDefinition",
                   source: str, op_name: str) -> RunRequest | SkipReason:
    """A run of the ingest to resolve a catalog table's name (only a Spark session can ask the
    catalog) and take whatever versions it has."""
    running = active_run(context, job.name)
    if running is not None:
        return SkipReason(f"ingest run {running.run_id[:8]} of {source} resolves its catalog "
                          f"table")
    window = int(time.time()) // RESOLVE_RETRY_S
    return RunRequest(run_key=f"{source}:resolve-catalog-table:{window}",
                      run_config={"ops": {op_name: {"config": {"files": []}}}},
                      tags={"tj/source": source, "tj/new_files": "unknown"})


def microbatch_sensor(pa: PipelineAssets) -> SensorDefinition:
    spec = pa.spec
    inputs = spec.pipeline_inputs()

    @sensor(name=f"{spec.name}_microbatch_sensor", job=pa.microbatch_job,
            minimum_interval_seconds=spec.sensor_interval_s,
            description=f"Runs the next micro-batch of `{spec.name}` when "
                        f"{' or '.join(f'`{i.name}`' for i in inputs)} has a new Delta version.")
    def _microbatch(context: SensorEvaluationContext, lake: LakeResource) -> RunRequest | SkipReason:
        layout = layout_of(lake, spec)
        versions = {i.name: delta.delta_version(layout.input_table(i.role)) for i in inputs}
        missing = [name for name, v in versions.items() if v is None]
        if missing:
            return SkipReason(f"waiting for {' and '.join(missing)}: no Delta table yet (nothing "
                              f"ingested from its landing folder)")
        at = ", ".join(f"{name} at v{v}" for name, v in versions.items())
        if _load_cursor(context.cursor) == versions:
            stopped = _stopped_last_run(context, pa.microbatch_job_name)
            return SkipReason(f"{at}: nothing new since the last batch" + (
                f", whose {_stopped(stopped)}" if stopped is not None else ""))
        running = active_run(context, pa.microbatch_job_name)
        if running is not None:
            return SkipReason(f"micro-batch run {running.run_id[:8]} is still in progress; "
                              f"{at} go into the next batch")
        context.update_cursor(json.dumps(versions))
        return RunRequest(
            run_key=f"{spec.name}:" + ":".join(f"{n}-v{v}" for n, v in versions.items()),
            tags={MODE_TAG: MODE_MICROBATCH,
                  **{f"tj/{n}_version": str(v) for n, v in versions.items()}})

    return _microbatch
