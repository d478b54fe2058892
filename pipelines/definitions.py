"""The Dagster code location: `defs`, loaded by workspace.yaml (`python_module: pipelines.definitions`).

Every pipeline is a spec (`joins.pipeline`: a union discriminated by `operator`), and every spec
becomes its own `Definitions` (`definitions_for`: input assets, the join asset partitioned by
event day, the micro-batch job and sensor, the landing sensors, the nightly backfill schedule,
the asset checks), merged with `Definitions.merge`. Specs come from YAML files in a folder
(`TJ_SPECS_DIR`, default `pipelines/specs/`, which holds the demo's `orders_with_rates.yaml`):
a user adds a join without writing Python. A bad file is reported by path and setting (in the
log and by the `spec_errors` sensor, whose every tick shows the errors in the UI) and left out;
the other pipelines still load.

The lake lives under `TJ_LAKE_ROOT` (default `./var/lake`); Spark follows `TJ_SPARK_MASTER` /
`TJ_SPARK_REMOTE`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from dagster import (
    AssetSelection,
    Definitions,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    in_process_executor,
    sensor,
)

from assets.factory import MODE_BACKFILL, MODE_TAG, build_pipeline_assets
from joins.pipeline import PipelineSpec, SpecFileError, load_spec_folder, parse_pipeline_spec
from joins.spark import SparkSettings
from pipelines.checks import build_join_checks
from pipelines.partitions import fitted_partitions
from pipelines.schedules import nightly_backfill_schedule
from pipelines.sensors import landing_sensor, microbatch_sensor
from pipelines.staleness import staleness_sensor
from resources import LakeResource, SparkResource

log = logging.getLogger(__name__)

DEFAULT_LAKE_ROOT = "./var/lake"
SPECS_DIR = Path(__file__).resolve().parent / "specs"
DEMO_SPEC_FILE = SPECS_DIR / "orders_with_rates.yaml"
# The demo's spec as plain settings (what a YAML file holds).
DEMO_SPEC: dict[str, Any] = yaml.safe_load(DEMO_SPEC_FILE.read_text())
# The demo's interval join: orders with the deliveries made within three hours.
DELIVERIES_SPEC: dict[str, Any] = yaml.safe_load((SPECS_DIR / "orders_with_deliveries.yaml").read_text())
# The demo's table joins: customers with accounts, the count per country, orders with customer.
ACCOUNTS_SPEC: dict[str, Any] = yaml.safe_load((SPECS_DIR / "customer_accounts.yaml").read_text())
COUNT_SPEC: dict[str, Any] = yaml.safe_load((SPECS_DIR / "accounts_per_country.yaml").read_text())
FK_SPEC: dict[str, Any] = yaml.safe_load((SPECS_DIR / "orders_with_customer.yaml").read_text())


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


def definitions_for(raw: PipelineSpec | dict[str, Any], *, lake_root: str | None = None) -> Definitions:
    """One pipeline's assets, checks, jobs, sensors and schedule (no resources). With
    `lake_root`, the join's event-day partitions are the days the lake has data for."""
    spec = parse_pipeline_spec(raw)
    partitions = None
    if lake_root is not None:
        partitions = fitted_partitions(LakeResource(root=lake_root).layout(spec))
    pa = build_pipeline_assets(spec, partitions)
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
    sensors = []
    for item in spec.pipeline_inputs():
        if item.source is None:
            continue  # another pipeline's output: its own pipeline produces it
        ingest = define_asset_job(ingest_job_name(item.source.name),
                                  selection=AssetSelection.assets(pa.input_asset(item.role)),
                                  description=f"Ingests new landing files of {item.source.name}.")
        jobs.append(ingest)
        sensors.append(landing_sensor(pa, item, ingest))
    sensors.append(microbatch_sensor(pa))
    schedules = []
    if spec.has_batch_form:
        # Staleness is the batch form disagreeing with the micro-batches: without a batch form
        # there is nothing to check per day and nothing to backfill.
        sensors.append(staleness_sensor(pa, checks_job))
        schedules.append(nightly_backfill_schedule(pa, backfill))
    return Definitions(assets=pa.assets, asset_checks=build_join_checks(pa), jobs=jobs,
                       sensors=sensors, schedules=schedules)


def spec_errors_sensor(errors: Sequence[SpecFileError]) -> SensorDefinition:
    """A sensor that only reports: every tick shows the spec files that did not load."""
    text = "\n".join(f"- {e}" for e in errors)

    @sensor(name="spec_errors", minimum_interval_seconds=3600,
            description=f"Pipeline spec files that did not load:\n{text}")
    def _errors(context: SensorEvaluationContext) -> SkipReason:
        return SkipReason(f"{len(errors)} spec file(s) did not load: " +
                          "; ".join(str(e) for e in errors))

    return _errors


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
        parts += [definitions_for(spec, lake_root=lake_root) for spec in loaded.specs]
        if loaded.errors:
            parts.append(Definitions(sensors=[spec_errors_sensor(loaded.errors)]))
    resources = {"spark": spark or spark_resource_from_env(), "lake": LakeResource(root=lake_root)}
    # Every step of a run in one process: they share its one SparkSession (a JVM start costs
    # seconds; the default multiprocess executor would start one per step).
    return Definitions.merge(*parts, Definitions(resources=resources, executor=in_process_executor))


defs = build_definitions(lake_root=lake_root_from_env(), spec_dir=specs_dir_from_env())
