"""The Dagster code location: `defs`, loaded by workspace.yaml (`python_module: pipelines.definitions`).

One join spec ships with the project: orders (a stream keyed by currency) enriched with the
currency rate valid at each order's time (a versioned table keyed by currency). The lake lives
under `TJ_LAKE_ROOT` (default `./var/lake`); Spark follows `TJ_SPARK_MASTER` / `TJ_SPARK_REMOTE`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from dagster import AssetSelection, Definitions, define_asset_job

from assets.factory import MODE_BACKFILL, MODE_TAG, build_join_assets
from assets.specs import JoinSpec, parse_join_spec
from joins.spark import SparkSettings
from pipelines.checks import build_join_checks
from pipelines.schedules import nightly_backfill_schedule
from pipelines.sensors import landing_sensor, microbatch_sensor
from resources import LakeResource, SparkResource

DEFAULT_LAKE_ROOT = "./var/lake"
HOUR_MS = 3_600_000

DEMO_SPEC: dict[str, Any] = {
    "name": "orders_with_rates",
    "description": "Orders enriched with the currency rate valid at each order's event time.",
    "stream": {
        "name": "orders",
        "format": "jsonl",
        "key_columns": [{"name": "currency", "type": "string"}],
        "value_columns": [{"name": "order_id", "type": "string", "nullable": False},
                          {"name": "amount", "type": "double"}],
        "ts_column": "ts",
        "on_bad_record": "quarantine",
        "description": "Orders as they arrive (JSON lines), keyed by currency.",
    },
    "table": {
        "name": "rates",
        "format": "csv",
        "key_columns": [{"name": "currency", "type": "string"}],
        "value_columns": [{"name": "rate", "type": "double"}],
        "ts_column": "ts",
        "on_bad_record": "quarantine",
        "description": "Currency rates (CSV) as a versioned table: every version with its "
                       "event time, one day of history.",
    },
    "join": "left",
    "history_retention_ms": 24 * HOUR_MS,
    "grace_ms": HOUR_MS // 2,
    "late": "join",
    "start_date": "2024-03-01",
    "backfill_horizon_days": 2,
    "quarantine_threshold": 0.05,
}


def lake_root_from_env() -> str:
    return os.environ.get("TJ_LAKE_ROOT") or DEFAULT_LAKE_ROOT


def spark_resource_from_env() -> SparkResource:
    settings = SparkSettings.from_env()
    return SparkResource(master=settings.master, remote=settings.remote,
                         shuffle_partitions=settings.shuffle_partitions,
                         driver_memory=settings.driver_memory)


def ingest_job_name(source: str) -> str:
    return f"{source}_ingest"


def backfill_job_name(spec: JoinSpec) -> str:
    return f"{spec.name}_backfill"


def checks_job_name(spec: JoinSpec) -> str:
    return f"{spec.name}_checks"


def build_definitions(specs: Sequence[JoinSpec | dict[str, Any]], *, lake_root: str,
                      spark: SparkResource | None = None) -> Definitions:
    """Assets, checks, jobs, sensors and the nightly schedule of every join spec."""
    assets, checks, jobs, sensors, schedules = [], [], [], [], []
    for raw in specs:
        spec = parse_join_spec(raw)
        ja = build_join_assets(spec)
        join_checks = build_join_checks(ja)
        assets += ja.assets
        checks += join_checks
        backfill = define_asset_job(
            backfill_job_name(spec), selection=AssetSelection.assets(ja.join),
            tags={MODE_TAG: MODE_BACKFILL},
            description=f"Backfill of {spec.name}: recomputes the selected event days in one run.")
        checks_job = define_asset_job(
            checks_job_name(spec), selection=AssetSelection.checks_for_assets(ja.join),
            description=f"Runs the asset checks of {spec.name} without recomputing it.")
        jobs += [backfill, checks_job, ja.microbatch_job]
        for source in (spec.table, spec.stream):
            ingest = define_asset_job(ingest_job_name(source.name),
                                      selection=AssetSelection.assets(ja.source_asset(source)),
                                      description=f"Ingests new landing files of {source.name}.")
            jobs.append(ingest)
            sensors.append(landing_sensor(ja, source, ingest))
        sensors.append(microbatch_sensor(ja))
        schedules.append(nightly_backfill_schedule(ja, backfill))
    return Definitions(
        assets=assets, asset_checks=checks, jobs=jobs, sensors=sensors, schedules=schedules,
        resources={"spark": spark or spark_resource_from_env(), "lake": LakeResource(root=lake_root)})


defs = build_definitions([DEMO_SPEC], lake_root=lake_root_from_env())
