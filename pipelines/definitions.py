"""The Dagster code location: `defs`, loaded by workspace.yaml (`python_module: pipelines.definitions`).

Every pipeline is a spec (`joins.pipeline`: a union discriminated by `operator`), and every spec
becomes its own `Definitions` (`pipelines.factory`: assets, jobs, sensors, schedule, checks),
merged with `Definitions.merge`; this module only loads the specs and merges. Specs come from
YAML (and SQL) files in a folder (`TJ_SPECS_DIR`, default `pipelines/specs/`, which holds the
demo's pipelines): a user adds a join without writing Python. A bad file is reported by path,
line and setting (in the log, and in the UI as a red asset of the `spec_errors` group:
`pipelines.spec_errors`) and left out; the other pipelines still load.

The lake lives under `TJ_LAKE_ROOT` (default `./var/lake`); Spark follows `TJ_SPARK_MASTER` /
`TJ_SPARK_REMOTE`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dagster import Definitions, in_process_executor

from joins.pipeline import PipelineSpec, load_spec_folder, parse_pipeline_spec
from joins.pipeline.files import resolved_spec
from joins.spark import SparkSettings
from pipelines.factory import definitions_for, shared_source_definitions
from pipelines.spec_errors import spec_error_definitions
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
                         driver_memory=settings.driver_memory, extra_conf=settings.extra_conf)


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
        parts += [definitions_for(spec, lake_root=lake_root, shared=shared,
                                  spec_file=loaded.files.get(spec.name))
                  for spec in loaded.specs]
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
