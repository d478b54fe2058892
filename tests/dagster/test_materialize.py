"""Ingestion, one micro-batch and a one-day backfill through the Dagster definitions, on tiny data:
the metadata a user needs is there, and the checks pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets, layout_of
from demo.sample_data import HOUR_MS, SampleConfig, generate, write_wave
from joins.lake import read_delta
from pipelines.checks import AGREEMENT, NO_DUPLICATES, QUARANTINE, build_join_checks
from pipelines.definitions import DEMO_SPEC, build_definitions
from resources import LakeResource, SparkResource
from tests.dagster.instances import memory_instance

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Waves of 16 h: a micro-batch moves table stream time well within the history retention (24 h)
# of the records it releases from the grace buffer. No late records: nothing for a backfill to fix.
TINY = SampleConfig(days=2, waves=3, orders_per_day=12, rate_interval_ms=4 * HOUR_MS, late_orders=0,
                    late_rates=0)
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _values(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: getattr(v, "value", getattr(v, "text", v)) for k, v in metadata.items()}


def _materializations(result: dg.ExecuteInProcessResult) -> list[tuple[str | None, dict[str, Any]]]:
    return [(ev.event_specific_data.materialization.partition,
             _values(ev.event_specific_data.materialization.metadata))
            for ev in result.all_events if ev.event_type_value == "ASSET_MATERIALIZATION"]


def _batch(result: dg.ExecuteInProcessResult, join: str) -> dict[str, Any]:
    """A micro-batch run's report: its numbers (one observation of the join asset) over the
    first day's materialization (that day's rows and the batch's references)."""
    days = _materializations(result)
    return {**(days[0][1] if days else {}), **_observations(result)[join]}


def _observations(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    return {ev.event_specific_data.asset_observation.asset_key.to_user_string():
            _values(ev.event_specific_data.asset_observation.metadata)
            for ev in result.all_events if ev.event_type_value == "ASSET_OBSERVATION"}


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {ev.event_specific_data.check_name: ev.event_specific_data.passed
            for ev in result.all_events if ev.event_type_value == "ASSET_CHECK_EVALUATION"}


def test_ingest_microbatch_backfill_and_checks(spark, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    resources = {"spark": SparkResource(shuffle_partitions=2), "lake": LakeResource(root=str(root))}
    ja = build_pipeline_assets(DEMO_SPEC)
    checks = build_join_checks(ja)
    layout = layout_of(resources["lake"], ja.spec)
    defs = build_definitions([DEMO_SPEC], lake_root=str(root), spark=resources["spark"])
    microbatch = defs.resolve_job_def(ja.microbatch_job_name)
    waves = generate(TINY)
    n_orders = sum(len(w.orders) for w in waves)

    with memory_instance() as instance:
        batches = []
        for wave in waves:
            write_wave(wave, orders_dir=Path(layout.landing(ja.spec.stream)),
                       rates_dir=Path(layout.landing(ja.spec.table)))
            ingest = dg.materialize(ja.assets[:2], resources=resources, instance=instance,
                                    run_config=QUIET)
            landing = _observations(ingest)["orders_landing"]
            assert landing["files"] == wave.index + 1 and landing["files_waiting"] == 0
            by_asset = {ev.asset_key.path[0]: _values(ev.materialization.metadata)
                        for ev in ingest.get_asset_materialization_events()}
            assert set(by_asset) == {"rates", "orders"}
            for name, md in by_asset.items():
                assert {"delta_version", "rows_in", "stored", "expired", "quarantined", "stream_time",
                        "table_path", "batch_id"} <= set(md)
                assert md["rows_in"] == md["stored"] + md["expired"] + md["quarantined"]
                assert md["table_path"] == str(root / "tables" / name)
                assert md["batch_id"] == wave.index
                assert md["dagster/row_count"] == read_delta(spark, md["table_path"]).count()
                assert "ts" in [c.name for c in md["dagster/column_schema"].columns]
            assert by_asset["orders"]["stored"] == len(wave.orders)

            run = microbatch.execute_in_process(instance=instance, run_config=QUIET)
            mats = _materializations(run)
            assert mats, "the micro-batch reports the event days it wrote to"
            md = _batch(run, "orders_with_rates")
            # A day's materialization holds the day's numbers and which batch wrote them, not
            # the batch's totals (reported once, so no plot repeats them under each day).
            assert all("batch_rows_in" not in d and d["batch_id"] == md["batch_id"] for _, d in mats)
            assert {"delta_version", "batch_rows_in", "rows_out", "batch_quarantined",
                    "batch_still_buffered", "stream_time", "event_days_touched", "lateness",
                    "table_path", "batch_late_joined", "dagster/row_count", "dagster/column_schema",
                    "lateness_p95_s", "watermark", "watermark_lag_s"} <= set(md)
            assert md["event_days_touched"] == ", ".join(sorted(p for p, _ in mats))
            assert md["batch_rows_in_stream"] == len(wave.orders)
            assert md["table_path"] == str(root / "joins" / "orders_with_rates" / "output")
            assert "p95" in md["lateness"]
            # Each day carries its own rows: what the batch wrote there, and the day's total.
            assert sum(d["rows_out"] for _, d in mats) == md["batch_rows_out"]
            output = read_delta(spark, md["table_path"])
            # Event times in epoch ms, each with its TIMESTAMP twin for people and SQL.
            assert {"ts_utc": "timestamp", "table_valid_from_utc": "timestamp"}.items() <= dict(
                output.dtypes).items()
            assert output.where("unix_millis(ts_utc) <> ts").count() == 0
            for day, d in mats:
                assert d["event_day"] == day
                assert d["dagster/row_count"] == output.where(f"event_date = '{day}'").count()
            held = _observations(run)["orders_with_rates_grace_buffer"]
            assert held["held_rows"] == md["batch_still_buffered"]
            batches.append(md)
        # The last wave carries one bad rate row and one expired rate, shown with their reasons.
        assert by_asset["rates"]["quarantined"] == 1 and by_asset["rates"]["expired"] == 1
        quarantine = _observations(ingest)["orders_with_rates_quarantine"]
        assert quarantine["dagster/row_count"] == 2 and quarantine["rows_from_rates"] == 2
        assert "expected a number (double), got 'n/a'" in quarantine["recent"]
        assert "expired: ts" in quarantine["recent"]
        # A left join emits every stream record once it left the grace buffer.
        assert sum(b["batch_rows_out"] for b in batches) + batches[-1]["batch_still_buffered"] == n_orders

        # Nothing new: the run does not materialize (the files were taken).
        again = dg.materialize([ja.input_asset("table")], resources=resources, instance=instance,
                               run_config=QUIET)
        assert again.get_asset_materialization_events() == []

        backfill = dg.materialize([ja.join, *checks], resources=resources, instance=instance,
                                  partition_key="2024-03-01", run_config=QUIET)
        [(partition, bmd)] = _materializations(backfill)
        assert partition == "2024-03-01"
        assert {"delta_version", "rows_out", "rows_added", "rows_removed", "rows_changed", "difference",
                "event_days_touched", "table_path", "dagster/row_count", "event_day"} <= set(bmd)
        assert bmd["dagster/row_count"] == bmd["rows_out"]
        # Grace covers the disorder and no table update came late: nothing to correct.
        assert bmd["agrees_with_microbatches"], bmd["difference"]
        assert bmd["rows_out"] > 0
        assert _checks(backfill) == {AGREEMENT: True, NO_DUPLICATES: True, QUARANTINE: True}

        latest = instance.get_latest_materialization_event(ja.join_key)
        assert latest is not None and latest.asset_materialization.metadata["mode"].value == "backfill"
