"""The Dagster code location: `defs`, loaded by workspace.yaml (`python_module: pipelines.definitions`).

Every pipeline is a spec (`joins.pipeline`: a union discriminated by `operator`), and every spec
becomes its own `Definitions` (`definitions_for`: input assets, the join asset partitioned by
event day, the micro-batch job and sensor, the landing sensors, the nightly backfill schedule,
the asset checks), merged with `Definitions.merge`. Specs come from YAML files in a folder
(`TJ_SPECS_DIR`, default `pipelines/specs/`, which holds the demo's `orders_with_rates.yaml`):
a user adds a join without writing Python. A bad file is reported by path, line and setting (in the
log, and in the UI as a red asset of the `spec_errors` group: `pipelines.spec_errors`) and left
out; the other pipelines still load.

The lake lives under `TJ_LAKE_ROOT` (default `./var/lake`); Spark follows `TJ_SPARK_MASTER` /
`TJ_SPARK_REMOTE`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetSelection,
    Definitions,
    SensorDefinition,
    define_asset_job,
    in_process_executor,
)

from assets.factory import MODE_BACKFILL, MODE_TAG, build_pipeline_assets
from assets.sources import SOURCES_GROUP, SourceAssets, build_source_assets
from joins.pipeline import PipelineSpec, load_spec_folder, parse_pipeline_spec
from joins.pipeline.files import SourceUse, resolved_spec
from joins.spark import SparkSettings
from pipelines.checks import build_join_checks
from pipelines.partitions import fitted_partitions
from pipelines.queries import query_job
from pipelines.reproduce import reproduce_job, reproducible
from pipelines.schedules import nightly_backfill_schedule
from pipelines.sensors import landing_sensor, microbatch_sensor
from pipelines.spec_errors import spec_error_definitions
from pipelines.staleness import staleness_sensor
from resources import LakeResource, SparkResource

log = logging.getLogger(__name__)

DEFAULT_LAKE_ROOT = "./var/lake"
SPECS_DIR = Path(__file__).resolve().parent / "specs"
DEMO_SPEC_FILE = SPECS_DIR / "orders_with_rates.yaml"
# The demo's specs as self-contained settings (the shared sources they name written inline):
# what Python callers and tests build one pipeline from.
DEMO_SPEC: dict[str, Any] = resolved_spec(DEMO_SPEC_FILE)
# The demo's interval join: orders with the deliveries made within three hours.
DELIVERIES_SPEC: dict[str, Any] = resolved_spec(SPECS_DIR / "orders_with_deliveries.yaml")
# The demo's table joins: customers with accounts, the count per country, orders with customer.
ACCOUNTS_SPEC: dict[str, Any] = resolved_spec(SPECS_DIR / "customer_accounts.yaml")
COUNT_SPEC: dict[str, Any] = resolved_spec(SPECS_DIR / "accounts_per_country.yaml")
FK_SPEC: dict[str, Any] = resolved_spec(SPECS_DIR / "orders_with_customer.yaml")


def lake_root_from_env() -> str:
    return os.environ.get("TJ_LAKE_ROOT") or DEFAULT_LAKE_ROOT


def specs_dir_from_env() -> Path:
    return Path(os.environ.get("TJ_SPECS_DIR") or SPECS_DIR)


def spark_resource_from_env() -> SparkResource:
    settings = SparkSettings.from_env()
    return SparkResource(master=settings.master, remote=settings.remote,
                         shuffle_partitions=settings.shuffle_partitions,
                         driver_memory=settings.driver_memory)


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
                    shared: frozenset[str] = frozenset()) -> Definitions:
    """One pipeline's assets, checks, jobs, sensors and schedule (no resources). With
    `lake_root`, the join's event-day partitions are the days the lake has data for.
    `shared`: the sources it reads that are defined apart (`shared_source_definitions`)."""
    spec = parse_pipeline_spec(raw)
    partitions = None
    if lake_root is not None:
        partitions = fitted_partitions(LakeResource(root=lake_root).layout(spec))
    pa = build_pipeline_assets(spec, partitions, shared=shared)
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


def build_definitions(specs: Sequence[PipelineSpec | dict[str, Any]] = (), *, lake_root: str,
                      spec_dir: str | Path | None = None,
                      spark: SparkResource | None = None) -> Definitions:
    """Definitions of `specs` plus every spec file of `spec_dir`, with the shared resources."""
    parsed = [parse_pipeline_spec(raw) for raw in specs]
    parts = [definitions_for(spec, lake_root=lake_root) for spec in parsed]
    if spec_dir is not None:
        taken = {n for s in parsed for n in (s.name, *(i.source.name for i in s.pipeline_inputs()
                                                        if i.source is not None))}
        loaded = load_spec_folder(spec_dir, taken=taken)
        for error in loaded.errors:
            log.error("pipeline spec not loaded: %s", error)
        shared = frozenset(loaded.sources)
        parts += [definitions_for(spec, lake_root=lake_root, shared=shared) for spec in loaded.specs]
        by_name = {spec.name: spec for spec in loaded.specs}
        parts += [shared_source_definitions(use, [by_name[r] for r in use.readers])
                  for use in loaded.sources.values()]
        if loaded.errors:
            taken = {k.path[-1] for part in parts for a in part.assets or ()
                     for k in getattr(a, "keys", [getattr(a, "key", None)]) if k is not None}
            parts.append(spec_error_definitions(loaded.errors, taken))
    resources = {"spark": spark or spark_resource_from_env(), "lake": LakeResource(root=lake_root)}
    # Every step of a run in one process: they share its one SparkSession (a JVM start costs
    # seconds; the default multiprocess executor would start one per step).
    return Definitions.merge(*parts, Definitions(resources=resources, executor=in_process_executor))


defs = build_definitions(lake_root=lake_root_from_env(), spec_dir=specs_dir_from_env())
