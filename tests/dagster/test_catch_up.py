"""A join added over data that already exists (issue 25, point 1): the demo's inputs landed and
ingested for three days before the join's first micro-batch, which takes all of it at once. Its
rows equal the backfill of every day, and its partitions offer every day."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets, layout_of
from demo.sample_data import HOUR_MS, SampleConfig, generate, write_wave
from pipelines.definitions import DEMO_SPEC, build_definitions
from pipelines.partitions import fitted_partitions
from resources import LakeResource, SparkResource
from tests.dagster.instances import memory_instance
from tests.dagster.test_materialize import _batch, _materializations

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
# Orderly data (nothing late) over three days: the join's one-day history retention is a third
# of what its first batch covers.
THREE_DAYS = SampleConfig(days=3, waves=3, orders_per_day=8, rate_interval_ms=4 * HOUR_MS,
                          late_orders=0, late_rates=0)
INNER = {**DEMO_SPEC, "join": "inner", "description": "The demo's join, inner, added late."}


def test_a_join_added_over_three_days_of_ingested_data_equals_their_backfill(
        spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    resources = {"spark": SparkResource(shuffle_partitions=2), "lake": LakeResource(root=str(root))}
    ja = build_pipeline_assets(INNER)
    layout = layout_of(resources["lake"], ja.spec)
    defs = build_definitions([INNER], lake_root=str(root), spark=resources["spark"])
    waves = generate(THREE_DAYS)
    days = ["2024-03-01", "2024-03-02", "2024-03-03"]
    with memory_instance() as instance:
        for wave in waves:
            write_wave(wave, orders_dir=Path(layout.landing(ja.spec.stream)),
                       rates_dir=Path(layout.landing(ja.spec.table)))
        dg.materialize(ja.assets[:2], resources=resources, instance=instance, run_config=QUIET)

        run = defs.resolve_job_def(ja.microbatch_job_name).execute_in_process(
            instance=instance, run_config=QUIET)
        batch = _batch(run, INNER["name"])
        assert sorted(p for p, _ in _materializations(run)) == days
        assert batch["batch_rows_in_stream"] == sum(len(w.orders) for w in waves)
        assert batch["batch_lookup_beyond_history_retention"] == 0
        # Reloaded (partitions are fixed while a code location is loaded), the join offers every
        # day for a backfill.
        fitted = fitted_partitions(layout)
        assert fitted.get_partition_keys() == days
        reloaded = build_pipeline_assets(INNER, fitted)

        for day in days:
            backfill = dg.materialize([reloaded.join], resources=resources, instance=instance,
                                      partition_key=day, run_config=QUIET)
            [(partition, md)] = _materializations(backfill)
            assert partition == day and md["rows_out"] > 0
            assert md["agrees_with_microbatches"], (day, md["difference"])
