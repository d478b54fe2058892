"""The nightly backfill schedule: exactly the stale days of the horizon (ending at the join's
stream time), one run per range of consecutive days; the whole horizon while no check looked."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from joins.core.time import day_start_ms
from joins.operators.stream_table_join.pipeline import StreamTableJoinEngine
from joins.pipeline import observe
from pipelines.checks import AGREEMENT
from pipelines.definitions import DEMO_SPEC, build_definitions
from resources import LakeResource
from resources.dagster_private import create_run_for_test

NAME = "orders_with_rates_nightly_backfill"
JOIN = dg.AssetKey("orders_with_rates")
DAYS = ["2024-03-01", "2024-03-02", "2024-03-03", "2024-03-04", "2024-03-05"]


@pytest.fixture
def defs(tmp_path, monkeypatch: pytest.MonkeyPatch) -> dg.Definitions:
    """Output on five days, stream time on the last one (5 h into 03-05)."""
    monkeypatch.setattr(observe, "day_rows", lambda layout: dict.fromkeys(DAYS, 10))
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time",
                        lambda self: day_start_ms(dt.date(2024, 3, 5)) + 5 * 3_600_000)
    return build_definitions([{**DEMO_SPEC, "backfill_horizon_days": 4}], lake_root=str(tmp_path))


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance):
    schedule = defs.resolve_schedule_def(NAME)
    with dg.build_schedule_context(
            instance=instance, scheduled_execution_time=dt.datetime(2026, 1, 1, 3, tzinfo=dt.UTC),
            resources={"lake": defs.resources["lake"]}) as context:
        return schedule.evaluate_tick(context)


def _verdict(instance: dg.DagsterInstance, day: str, passed: bool) -> None:
    """A verdict of the agreement check on one day, as a check run records it (a run of its own:
    a run holds one verdict per day)."""
    from dagster import DagsterEvent, DagsterEventType

    run = create_run_for_test(instance, job_name="orders_with_rates_checks")
    instance.report_dagster_event(DagsterEvent(
        event_type_value=DagsterEventType.ASSET_CHECK_EVALUATION.value,
        job_name=run.job_name, event_specific_data=dg.AssetCheckEvaluation(
            asset_key=JOIN, check_name=AGREEMENT, passed=passed, partition=day,
            severity=dg.AssetCheckSeverity.WARN)), run_id=run.run_id)


def _ranges(tick) -> list[tuple[str, str]]:
    return [(rr.tags["dagster/asset_partition_range_start"], rr.tags["dagster/asset_partition_range_end"])
            for rr in tick.run_requests]


def test_without_any_verdict_the_whole_horizon_is_backfilled(defs, instance) -> None:
    tick = _tick(defs, instance)
    assert _ranges(tick) == [("2024-03-02", "2024-03-05")]
    [rr] = tick.run_requests
    assert rr.tags["tj/mode"] == "backfill" and rr.tags["tj/horizon_days"] == "4"
    assert "has not looked" in rr.tags["tj/why"]
    assert defs.resolve_schedule_def(NAME).job_name == "orders_with_rates_backfill"


def test_exactly_the_stale_days_one_run_per_range(defs, instance) -> None:
    for day in DAYS[1:]:
        _verdict(instance, day, True)
    _verdict(instance, "2024-03-02", False)
    _verdict(instance, "2024-03-04", False)
    _verdict(instance, "2024-03-05", False)
    # The latest verdict counts: a day that failed, then passed after a backfill, is fresh.
    _verdict(instance, "2024-03-03", False)
    _verdict(instance, "2024-03-03", True)
    # A stale day before the horizon is not the nightly run's.
    _verdict(instance, "2024-03-01", False)
    tick = _tick(defs, instance)
    assert _ranges(tick) == [("2024-03-02", "2024-03-02"), ("2024-03-04", "2024-03-05")]
    assert all(rr.tags["tj/why"].startswith("stale") for rr in tick.run_requests)
    assert len({rr.run_key for rr in tick.run_requests}) == 2


def test_nothing_stale_skips_and_says_which_days_passed(defs, instance) -> None:
    for day in DAYS[2:]:
        _verdict(instance, day, True)
    tick = _tick(defs, instance)
    assert not tick.run_requests
    assert tick.skip_message == ("no stale day in 2024-03-02..2024-03-05: the agreement check "
                                 "passed on 2024-03-03, 2024-03-04, 2024-03-05")


def test_before_anything_was_joined_the_horizon_ends_at_the_schedule_date(tmp_path, instance) -> None:
    defs = build_definitions([{**DEMO_SPEC, "start_date": "2025-12-31"}], lake_root=str(tmp_path))
    schedule = defs.resolve_schedule_def(NAME)
    with dg.build_schedule_context(
            instance=instance, scheduled_execution_time=dt.datetime(2026, 1, 1, 3, tzinfo=dt.UTC),
            resources={"lake": LakeResource(root=str(tmp_path))}) as context:
        tick = schedule.evaluate_tick(context)
    # The only partition is the start date, the last day of the 2-day horizon ending 2026-01-01.
    [rr] = tick.run_requests
    assert _ranges(tick) == [("2025-12-31", "2025-12-31")]
    assert "schedule's date" in rr.tags["tj/horizon_basis"]
