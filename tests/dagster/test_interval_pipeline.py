"""The interval join through the Dagster factory (issue 12, item 5): two event-stream assets and
an interval-join asset from the YAML spec; per-batch metadata (rows buffered per side,
watermarks per column, late rows, outer rows) as numbers; checks and a nightly-style backfill."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets, layout_of
from demo.sample_data import HOUR_MS, SampleConfig, generate, write_wave
from demo.sample_deliveries import DeliveryConfig, generate_deliveries, write_deliveries
from joins.errors import ConfigError
from joins.pipeline import parse_pipeline_spec
from pipelines.definitions import DELIVERIES_SPEC, build_definitions
from pipelines.factory import checks_job_name
from resources import LakeResource, SparkResource
from tests.dagster.instances import memory_instance
from tests.dagster.test_materialize import QUIET, _batch, _checks, _materializations

TINY = SampleConfig(days=2, waves=3, orders_per_day=12, rate_interval_ms=4 * HOUR_MS,
                    late_orders=0, late_rates=0)


def test_the_yaml_spec_builds_two_event_assets_and_the_join() -> None:
    ja = build_pipeline_assets(DELIVERIES_SPEC)
    assert [a.key.to_user_string() for a in ja.assets] == [
        "orders", "deliveries", "orders_with_deliveries", "orders_landing",
        "deliveries_landing", "orders_with_deliveries_quarantine"]
    assert ja.spec.hold_back_ms() == 3 * HOUR_MS


@pytest.mark.parametrize(("condition", "message"), [
    ("deliveries.ts >= orders.ts", "no time bound limits how long left rows are buffered"),
    ("deliveries.ts BETWEEN orders.ts AND orders.ts + 1 OR orders.amount > 1",
     "OR is not supported"),
    ("deliveries.ts BETWEEN orders.ts AND orders.ts + orders.amount",
     "is a non-constant bound"),
    ("deliveries.ts BETWEEN orders.ts + 10 AND orders.ts", "no pair of rows can join"),
    # Declared types: a key equality of a double and a string column never matches.
    ("deliveries.ts BETWEEN orders.ts AND orders.ts + 1 AND orders.amount = deliveries.order_id",
     "`orders.amount = deliveries.order_id` compares a double key with a string one"),
    ("deliveries.courier BETWEEN orders.ts AND orders.ts + 1",
     "`deliveries.courier` is a time column of the condition .* but is declared string"),
    ("orders.amount BETWEEN deliveries.ts - 1 AND deliveries.ts", "declared double"),
])
def test_bad_conditions_are_refused_when_the_spec_loads(condition: str, message: str) -> None:
    raw = copy.deepcopy(DELIVERIES_SPEC)
    raw["condition"] = condition
    with pytest.raises(ConfigError, match=rf"orders_with_deliveries.*config\.condition: .*{message}"):
        parse_pipeline_spec(raw)


@pytest.mark.spark
@pytest.mark.slow
def test_ingest_microbatches_metadata_checks_and_backfill(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    resources = {"spark": SparkResource(shuffle_partitions=2), "lake": LakeResource(root=str(root))}
    ja = build_pipeline_assets(DELIVERIES_SPEC)
    layout = layout_of(resources["lake"], ja.spec)
    defs = build_definitions([DELIVERIES_SPEC], lake_root=str(root), spark=resources["spark"])
    microbatch = defs.resolve_job_def(ja.microbatch_job_name)
    waves = generate(TINY)
    deliveries = generate_deliveries(TINY, waves, DeliveryConfig(late_deliveries=1))
    with memory_instance() as instance:
        batches = []
        for wave in waves:
            write_wave(wave, orders_dir=Path(layout.landing(ja.spec.left)),
                       rates_dir=tmp_path / "unused_rates")
            write_deliveries(wave.index, deliveries.waves[wave.index],
                             Path(layout.landing(ja.spec.right)))
            dg.materialize(ja.assets[:2], resources=resources, instance=instance, run_config=QUIET)
            result = microbatch.execute_in_process(instance=instance, run_config=QUIET)
            md = _batch(result, "orders_with_deliveries")
            # The batch's totals carry a `batch_` prefix (a day's materialization has its own rows).
            for key in ("buffered_left", "buffered_right", "late_left", "late_right",
                        "outer_rows_left", "outer_rows_right", "joined_rows"):
                assert isinstance(md[f"batch_{key}"], int), key  # numeric: Dagster plots it per batch
            # The watermarks are times (a timestamp the UI shows as a date), not a number of ms
            # to plot: seconds since the epoch, in the demo's March 2024.
            for key in ("watermark_in_orders_ts", "watermark_in_deliveries_ts",
                        "watermark_out_orders_ts", "watermark_out_deliveries_ts"):
                assert isinstance(md[f"batch_{key}"], float), key
                assert 1_709_251_200 <= md[f"batch_{key}"] < 1_709_251_200 + 4 * 86_400, key
            assert "watermarks" in md and md["batch_rows_in_left"] == len(wave.orders)
            batches.append(md)
        assert sum(b["batch_joined_rows"] for b in batches) > 0
        assert sum(b["batch_outer_rows_left"] for b in batches) > 0   # orders without a delivery
        assert sum(b["batch_late_right"] for b in batches) == 1       # the late delivery, quarantined
        # The partitions fit the data once the code location loads again (the UI's Reload).
        defs = build_definitions([DELIVERIES_SPEC], lake_root=str(root), spark=resources["spark"])
        # The agreement check is per event day: over the data's days, as the staleness sensor runs it.
        days = {"dagster/asset_partition_range_start": "2024-03-01",
                "dagster/asset_partition_range_end": "2024-03-02"}
        checks = _checks(defs.resolve_job_def(checks_job_name(ja.spec)).execute_in_process(
            instance=instance, run_config=QUIET, tags=days))
        assert checks["no_duplicate_output_rows"] and checks["quarantine_below_threshold"]
        assert not checks["backfill_agrees_with_stream"]           # the late delivery's day
        day = "2024-03-01"
        backfill = defs.resolve_job_def(f"{ja.spec.name}_backfill")
        done = backfill.execute_in_process(instance=instance, run_config=QUIET, partition_key=day)
        assert _materializations(done)[0][1]["rows_added"] >= 1
        checks = _checks(defs.resolve_job_def(checks_job_name(ja.spec)).execute_in_process(
            instance=instance, run_config=QUIET, tags=days))
        assert all(checks.values()), checks
