"""Warm a Spark for the UI's runs (`python -m runplatform.warm_up`, with TJ_SPARK_REMOTE set).

A JVM runs a job several times slower before its JIT has compiled the code paths: on a fresh
Spark Connect server the demo's first backfill takes two to three times what the same backfill
takes once the server is warm. `./tj dev` starts a Connect server and then this in the
background: the demo pipeline's own jobs (ingest, micro-batch, a two-day backfill with its
checks) on a tiny sample, in a temporary lake and Dagster instance, so that the user's first
runs find the server warm.
Nothing of the user's lake or instance is touched.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import dagster as dg

from assets.factory import build_pipeline_assets, layout_of
from pipelines.definitions import DEMO_SPEC, build_definitions, spark_resource_from_env
from pipelines.factory import backfill_job_name
from resources import LakeResource, SparkResource

# The sample starts on 2024-03-01 (UTC), the demo pipeline's start_date.
START_MS = 1_709_251_200_000
HOUR_MS = 3_600_000
RATES = {"EUR": 1.08, "USD": 1.0, "GBP": 0.86}
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
DAYS = {"dagster/asset_partition_range_start": "2024-03-01",
        "dagster/asset_partition_range_end": "2024-03-02"}


def tiny_waves(days: int = 2, waves: int = 3) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """(orders, rates) of each landing wave over `days` event days: a rate per currency every
    four hours and a dozen orders a day, each landing in the wave of its time. The code paths
    of ingest, micro-batch and backfill, not the volume (the demo's own data: `demo`)."""
    span = days * 24 * HOUR_MS
    out: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = [([], []) for _ in range(waves)]

    def wave(ts: int) -> int:
        return min(waves - 1, (ts - START_MS) * waves // span)

    for hour in range(0, days * 24, 4):
        ts = START_MS + hour * HOUR_MS
        for currency, rate in RATES.items():
            out[wave(ts)][1].append({"currency": currency, "rate": rate + hour / 10_000, "ts": ts})
    orders = 12 * days
    for i in range(orders):
        ts = START_MS + i * span // orders + 7 * 60_000
        out[wave(ts)][0].append({"order_id": f"w-{i:03d}", "currency": list(RATES)[i % len(RATES)],
                                 "amount": 10.0 + i, "ts": ts})
    return out


def _land(orders: list[dict[str, Any]], rates: list[dict[str, Any]], index: int,
          orders_dir: Path, rates_dir: Path) -> None:
    orders_dir.mkdir(parents=True, exist_ok=True)
    rates_dir.mkdir(parents=True, exist_ok=True)
    (orders_dir / f"{index:04d}-orders.jsonl").write_text(
        "".join(json.dumps(o, sort_keys=True) + "\n" for o in orders))
    with (rates_dir / f"{index:04d}-rates.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, ["currency", "rate", "ts"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rates)


def sample_lake(root: Path, instance: dg.DagsterInstance, spark: SparkResource, *,
                days: int = 2, waves: int = 3) -> None:
    """Land, ingest and micro-batch `tiny_waves` (a wave, a micro-batch) into the demo
    pipeline's lake at `root`."""
    resources = {"spark": spark, "lake": LakeResource(root=str(root))}
    ja = build_pipeline_assets(DEMO_SPEC)
    layout = layout_of(resources["lake"], ja.spec)
    defs = build_definitions([DEMO_SPEC], lake_root=str(root), spark=spark)
    for index, (orders, rates) in enumerate(tiny_waves(days, waves)):
        _land(orders, rates, index, Path(layout.landing(ja.spec.stream)),
              Path(layout.landing(ja.spec.table)))
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


DEFAULT_BACKFILLS = 3
DEFAULT_WAVES = 3


def _count_from_env(name: str, default: int, what: str, *, least: int = 0) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < least:
        raise SystemExit(f"{name}: expected a whole number of {what} ({least} or more), "
                         f"got {text!r}")
    return int(text)


def backfills_from_env() -> int:
    """TJ_WARM_UP_BACKFILLS: how many backfills of the sample the warm-up runs after its
    micro-batches (default 3: the third finds the JIT about as warm as many more would). The
    tests that start a warm-up take 1: they prove the warm-up runs, not how warm it gets."""
    return _count_from_env("TJ_WARM_UP_BACKFILLS", DEFAULT_BACKFILLS, "backfills")


def waves_from_env() -> int:
    """TJ_WARM_UP_WAVES: how many landing waves (each an ingest and a micro-batch) the sample
    lands before the backfills (default 3, at least 1). The tests that start a warm-up take 1,
    for the reason they take one backfill."""
    return _count_from_env("TJ_WARM_UP_WAVES", DEFAULT_WAVES, "landing waves", least=1)


def warm_up(backfills: int = DEFAULT_BACKFILLS, waves: int = DEFAULT_WAVES) -> list[float]:
    """Run the sample pipeline over `waves` landing waves, then `backfills` backfills; returns
    each backfill's seconds."""
    spark = spark_resource_from_env()
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tj-warm-up-") as tmp, \
            dg.DagsterInstance.ephemeral() as instance:
        root = Path(tmp) / "lake"
        sample_lake(root, instance, spark, waves=waves)
        for _ in range(backfills):
            started = time.monotonic()
            if not backfill_days(root, instance, spark).success:
                raise RuntimeError("the warm-up backfill failed")
            times.append(time.monotonic() - started)
    return times


def main() -> int:
    warnings.filterwarnings("ignore")   # Dagster's beta/preview notes: this log is read by people
    started = time.monotonic()
    times = warm_up(backfills_from_env(), waves_from_env())
    print(f"Spark warmed up in {time.monotonic() - started:.0f} s (backfills of the sample: "
          f"{', '.join(f'{t:.1f} s' for t in times)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
