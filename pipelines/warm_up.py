"""Warm a Spark for the UI's runs (`python -m pipelines.warm_up`, with TJ_SPARK_REMOTE set).

A JVM runs a job several times slower before its JIT has compiled the code paths (measured on
a fresh Spark Connect server, one two-day backfill of the demo after another: 19 s, 9.9 s, 7.1 s,
7.4 s). `./tj dev` starts a Connect server and then this in the background: the demo pipeline's
own jobs (ingest, micro-batch, a two-day backfill with its checks) on a tiny sample, in a
temporary lake and Dagster instance, so that the user's first runs find the server warm.
Nothing of the user's lake or instance is touched.
"""

from __future__ import annotations

import sys
import tempfile
import time
import warnings
from pathlib import Path

import dagster as dg

from assets.factory import build_pipeline_assets, layout_of
from pipelines.definitions import (
    DEMO_SPEC,
    backfill_job_name,
    build_definitions,
    spark_resource_from_env,
)
from pipelines.sample_data import HOUR_MS, SampleConfig, generate, write_wave
from resources import LakeResource, SparkResource

# Two event days (2024-03-01 and -02), a few dozen rows: the code paths, not the volume.
TINY = SampleConfig(days=2, waves=3, orders_per_day=12, rate_interval_ms=4 * HOUR_MS, late_orders=0,
                    late_rates=0)
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
DAYS = {"dagster/asset_partition_range_start": "2024-03-01",
        "dagster/asset_partition_range_end": "2024-03-02"}


def sample_lake(root: Path, instance: dg.DagsterInstance, spark: SparkResource,
                sample: SampleConfig = TINY) -> None:
    """Land, ingest and micro-batch `sample` (a wave, a micro-batch) into the demo pipeline's
    lake at `root`."""
    resources = {"spark": spark, "lake": LakeResource(root=str(root))}
    ja = build_pipeline_assets(DEMO_SPEC)
    layout = layout_of(resources["lake"], ja.spec)
    defs = build_definitions([DEMO_SPEC], lake_root=str(root), spark=spark)
    for wave in generate(sample):
        write_wave(wave, orders_dir=Path(layout.landing(ja.spec.stream)),
                   rates_dir=Path(layout.landing(ja.spec.table)))
        dg.materialize(ja.assets[:2], resources=resources, instance=instance, run_config=QUIET)
        defs.resolve_job_def(ja.microbatch_job_name).execute_in_process(instance=instance,
                                                                        run_config=QUIET)


def backfill_days(root: Path, instance: dg.DagsterInstance, spark: SparkResource,
                  days: dict[str, str] = DAYS) -> dg.ExecuteInProcessResult:
    """The demo pipeline's backfill job (the join's batch form and its checks) over `days`
    (Dagster's partition range tags)."""
    defs = build_definitions([DEMO_SPEC], lake_root=str(root), spark=spark)
    job = backfill_job_name(build_pipeline_assets(DEMO_SPEC).spec)
    return defs.resolve_job_def(job).execute_in_process(instance=instance, run_config=QUIET,
                                                        tags=days, raise_on_error=False)


def warm_up(backfills: int = 3) -> list[float]:
    """Run the sample pipeline, then `backfills` backfills; returns each backfill's seconds."""
    spark = spark_resource_from_env()
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tj-warm-up-") as tmp, \
            dg.DagsterInstance.ephemeral() as instance:
        root = Path(tmp) / "lake"
        sample_lake(root, instance, spark)
        for _ in range(backfills):
            started = time.monotonic()
            if not backfill_days(root, instance, spark).success:
                raise RuntimeError("the warm-up backfill failed")
            times.append(time.monotonic() - started)
    return times


def main() -> int:
    warnings.filterwarnings("ignore")   # Dagster's beta/preview notes: this log is read by people
    started = time.monotonic()
    times = warm_up()
    print(f"Spark warmed up in {time.monotonic() - started:.0f} s (backfills of the sample: "
          f"{', '.join(f'{t:.1f} s' for t in times)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
