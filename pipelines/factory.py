"""One pipeline spec -> its own `Definitions`: the input assets, the join asset partitioned by
event day, its jobs (micro-batch, backfill, checks, ingest, queries, reproduce), sensors (landing,
micro-batch, staleness), the nightly backfill schedule and the asset checks. The code location
(`pipelines.definitions`) loads the specs and merges what this returns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagster import AssetSelection, Definitions, SensorDefinition, define_asset_job

from assets.factory import MODE_BACKFILL, MODE_TAG, build_pipeline_assets
from assets.sources import SOURCES_GROUP, SourceAssets, build_source_assets
from joins.pipeline import PipelineSpec, parse_pipeline_spec
from joins.pipeline.files import SourceUse
from pipelines.checks import build_join_checks
from pipelines.partitions import fitted_partitions
from pipelines.queries import query_job
from pipelines.reproduce import reproduce_job, reproducible
from pipelines.schedules import nightly_backfill_schedule
from pipelines.sensors import landing_sensor, microbatch_sensor
from pipelines.staleness import staleness_sensor
from resources import LakeResource


def ingest_job_name(source: str) -> str:
    return f"{source}_ingest"


def backfill_job_name(spec: PipelineSpec) -> str:
    return f"{spec.name}_backfill"


def checks_job_name(spec: PipelineSpec) -> str:
    return f"{spec.name}_checks"


def source_jobs(sa: SourceAssets, *, interval_s: int) -> tuple[list[Any], SensorDefinition]:
    """A source's ingest job (and, for a versioned table, its query job) and the landing sensor
    that runs the ingest."""
    ingest = define_asset_job(ingest_job_name(sa.name), selection=AssetSelection.assets(sa.table),
                              description=f"Ingests new landing files of {sa.name}.")
    jobs = [ingest, *([query_job(sa.item)] if sa.item.kind == "versioned" else [])]
    return jobs, landing_sensor(sa, ingest, interval_s=interval_s)


def shared_source_definitions(use: SourceUse, readers: Sequence[PipelineSpec]) -> Definitions:
    """A source read by many joins: its table and landing assets, ingest job and sensor, once."""
    sa = build_source_assets(use.input(), group=SOURCES_GROUP, readers=tuple(readers))
    jobs, sensor_def = source_jobs(sa, interval_s=min(r.sensor_interval_s for r in readers))
    return Definitions(assets=[sa.table, sa.landing], jobs=jobs, sensors=[sensor_def])


def definitions_for(raw: PipelineSpec | dict[str, Any], *, lake_root: str | None = None,
                    shared: frozenset[str] = frozenset(), spec_file: str | None = None
                    ) -> Definitions:
    """One pipeline's assets, checks, jobs, sensors and schedule (no resources). With
    `lake_root`, the join's event-day partitions are the days the lake has data for.
    `shared`: the sources it reads that are defined apart (`shared_source_definitions`)."""
    spec = parse_pipeline_spec(raw)
    partitions = None
    if lake_root is not None:
        partitions = fitted_partitions(LakeResource(root=lake_root).layout(spec))
    pa = build_pipeline_assets(spec, partitions, shared=shared, spec_file=spec_file)
    backfill = define_asset_job(
        backfill_job_name(spec), selection=AssetSelection.assets(pa.join_key),
        tags={MODE_TAG: MODE_BACKFILL},
        description=f"Backfill of {spec.name}: recomputes the selected event days in one run.")
    checks_job = define_asset_job(
        checks_job_name(spec), selection=AssetSelection.checks_for_assets(pa.join_key),
        description=f"Runs the asset checks of {spec.name} without recomputing it.")
    jobs: list[Any] = [checks_job, pa.microbatch_job]
    if spec.has_batch_form:
        jobs.insert(0, backfill)
    if reproducible(spec):
        jobs.append(reproduce_job(spec))
    sensors = []
    for sa in pa.sources.values():
        source_job_defs, landing = source_jobs(sa, interval_s=spec.sensor_interval_s)
        jobs += source_job_defs
        sensors.append(landing)
    sensors.append(microbatch_sensor(pa))
    schedules = []
    if spec.has_batch_form:
        # Staleness is the batch form disagreeing with the micro-batches: without a batch form
        # there is nothing to check per day and nothing to backfill.
        sensors.append(staleness_sensor(pa, checks_job))
        schedules.append(nightly_backfill_schedule(pa, backfill))
    return Definitions(assets=pa.assets, asset_checks=build_join_checks(pa), jobs=jobs,
                       sensors=sensors, schedules=schedules)
