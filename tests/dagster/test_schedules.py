"""The nightly backfill schedule: one run over the last N event days, ending at stream time."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from pipelines.definitions import DEMO_SPEC, build_definitions
from pipelines.partitions import day_start_ms

NAME = "orders_with_rates_nightly_backfill"


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance, when: dt.datetime):
    schedule = defs.resolve_schedule_def(NAME)
    return schedule.evaluate_tick(dg.build_schedule_context(instance=instance,
                                                            scheduled_execution_time=when))


def test_horizon_ends_at_the_joins_stream_time(instance: dg.DagsterInstance) -> None:
    defs = build_definitions([DEMO_SPEC], lake_root="/tmp/unused")
    stream_time = day_start_ms(dt.date(2024, 3, 3)) + 5 * 3_600_000
    instance.report_runless_asset_event(dg.AssetMaterialization(
        asset_key="orders_with_rates", partition="2024-03-03",
        metadata={"stream_time": dg.MetadataValue.int(stream_time)}))
    [rr] = _tick(defs, instance, dt.datetime(2026, 1, 1, 3, tzinfo=dt.UTC)).run_requests
    assert rr.tags["dagster/asset_partition_range_start"] == "2024-03-02"
    assert rr.tags["dagster/asset_partition_range_end"] == "2024-03-03"
    assert rr.tags["tj/mode"] == "backfill" and rr.tags["tj/horizon_days"] == "2"
    assert defs.resolve_schedule_def(NAME).job_name == "orders_with_rates_backfill"


def test_horizon_is_configurable_and_clipped_to_the_first_partition(instance: dg.DagsterInstance) -> None:
    defs = build_definitions([{**DEMO_SPEC, "backfill_horizon_days": 10}], lake_root="/tmp/unused")
    instance.report_runless_asset_event(dg.AssetMaterialization(
        asset_key="orders_with_rates", partition="2024-03-03",
        metadata={"stream_time": dg.MetadataValue.int(day_start_ms(dt.date(2024, 3, 3)))}))
    [rr] = _tick(defs, instance, dt.datetime(2026, 1, 1, 3, tzinfo=dt.UTC)).run_requests
    assert rr.tags["dagster/asset_partition_range_start"] == "2024-03-01"
    assert rr.tags["dagster/asset_partition_range_end"] == "2024-03-03"


def test_without_materialization_the_horizon_ends_at_the_schedule_date(instance: dg.DagsterInstance) -> None:
    defs = build_definitions([DEMO_SPEC], lake_root="/tmp/unused")
    [rr] = _tick(defs, instance, dt.datetime(2024, 3, 10, 3, tzinfo=dt.UTC)).run_requests
    assert rr.tags["dagster/asset_partition_range_start"] == "2024-03-09"
    assert rr.tags["dagster/asset_partition_range_end"] == "2024-03-10"
    assert "schedule's date" in rr.tags["tj/horizon_basis"]
