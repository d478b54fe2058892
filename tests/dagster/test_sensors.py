"""Sensors with build_sensor_context: new files -> one run with a stable run key, nothing new ->
a skip reason saying why, and a cursor that advances."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from pipelines.definitions import DEMO_SPEC, build_definitions
from resources import LakeResource
from resources.dagster_private import create_run_for_test


@pytest.fixture
def lake_root(tmp_path: Path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def defs(lake_root: Path) -> dg.Definitions:
    return build_definitions([DEMO_SPEC], lake_root=str(lake_root))


def _tick(defs: dg.Definitions, name: str, instance: dg.DagsterInstance, cursor: str | None,
          lake_root: Path):
    sensor = defs.resolve_sensor_def(name)
    with dg.build_sensor_context(instance=instance, cursor=cursor, sensor_name=name,
                                 resources={"lake": LakeResource(root=str(lake_root))}) as ctx:
        return sensor.evaluate_tick(ctx)


def _land(folder: Path, name: str, text: str = "{}\n") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_landing_sensor_requests_new_files_once(defs, instance, lake_root: Path) -> None:
    folder = lake_root / "landing" / "orders"
    empty = _tick(defs, "orders_landing_sensor", instance, None, lake_root)
    assert not empty.run_requests
    assert empty.skip_message == f"no new files in {folder}"

    _land(folder, "0001-orders.jsonl")
    _land(folder, "0000-orders.jsonl")
    _land(folder, ".0002-orders.jsonl.tmp")  # still being written: not landed
    first = _tick(defs, "orders_landing_sensor", instance, None, lake_root)
    [rr] = first.run_requests
    files = ["0000-orders.jsonl", "0001-orders.jsonl"]
    assert rr.run_config == {"ops": {"orders": {"config": {"files": files}}}}
    assert json.loads(first.cursor) == {"through": "0001-orders.jsonl", "in_flight": files}
    # The same landing state evaluated again from the same cursor asks for the same run key.
    again = _tick(defs, "orders_landing_sensor", instance, None, lake_root)
    assert again.run_requests[0].run_key == rr.run_key

    quiet = _tick(defs, "orders_landing_sensor", instance, first.cursor, lake_root)
    assert not quiet.run_requests and quiet.skip_message == f"no new files in {folder}"

    _land(folder, "0002-orders.jsonl")
    second = _tick(defs, "orders_landing_sensor", instance, first.cursor, lake_root)
    [rr2] = second.run_requests
    assert rr2.run_config["ops"]["orders"]["config"]["files"] == ["0002-orders.jsonl"]
    assert rr2.run_key != rr.run_key
    assert json.loads(second.cursor) == {"through": "0002-orders.jsonl",
                                         "in_flight": [*files, "0002-orders.jsonl"]}


def test_landing_sensor_cursor_stays_small_and_finds_a_file_named_out_of_order(
        defs, instance, lake_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cursor holds only requested files no ingest has taken yet; a file landed under a
    name before the last one requested is still requested."""
    from joins.pipeline import observe

    folder = lake_root / "landing" / "orders"
    names = [f"{n:04d}-orders.jsonl" for n in range(50)]
    for name in names:
        _land(folder, name)
    first = _tick(defs, "orders_landing_sensor", instance, None, lake_root)
    assert len(json.loads(first.cursor)["in_flight"]) == 50
    # The ingest took them all (its batch log says so); one more lands, named "early".
    _land(folder, "0000-early.jsonl")
    real = observe.landing_status
    monkeypatch.setattr(observe, "landing_status", lambda layout, item: dataclasses.replace(
        real(layout, item), pending=("0000-early.jsonl",)))
    late = _tick(defs, "orders_landing_sensor", instance, first.cursor, lake_root)
    [rr] = late.run_requests
    assert rr.run_config["ops"]["orders"]["config"]["files"] == ["0000-early.jsonl"]
    assert json.loads(late.cursor) == {"through": "0049-orders.jsonl",
                                       "in_flight": ["0000-early.jsonl"]}


def test_landing_sensor_waits_while_an_ingest_of_the_source_runs(defs, instance,
                                                                 lake_root: Path) -> None:
    from joins.lake import Lease

    folder = lake_root / "landing" / "orders"
    _land(folder, "0000-orders.jsonl")
    run = create_run_for_test(instance, job_name="orders_ingest", status=dg.DagsterRunStatus.STARTED)
    busy = _tick(defs, "orders_landing_sensor", instance, None, lake_root)
    assert not busy.run_requests and busy.cursor is None  # the file waits for the next tick
    assert busy.skip_message == (f"ingest run {run.run_id[:8]} of orders is queued or running; "
                                 f"1 new file(s) go into the next run")
    # Another source's run does not hold this one back.
    assert _tick(defs, "rates_landing_sensor", instance, None, lake_root).skip_message.startswith(
        "no new files")
    instance.report_run_failed(run)

    # An ingest started some other way (a manual run, the demo) holds the source's lease.
    lease = Lease(str(lake_root / "leases" / "orders"), purpose="ingest of orders", owner="manual")
    lease.acquire()
    held = _tick(defs, "orders_landing_sensor", instance, None, lake_root)
    assert not held.run_requests
    assert held.skip_message.startswith("an ingest of orders is running (ingest of orders by manual")
    lease.release()
    [rr] = _tick(defs, "orders_landing_sensor", instance, None, lake_root).run_requests
    assert rr.run_config["ops"]["orders"]["config"]["files"] == ["0000-orders.jsonl"]


def test_landing_sensor_targets_the_ingest_job(defs) -> None:
    assert defs.resolve_sensor_def("rates_landing_sensor").job_name == "rates_ingest"


def test_microbatch_sensor(defs, instance, lake_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from joins import lake as delta

    versions: dict[str, int | None] = {"orders": None, "rates": None}
    monkeypatch.setattr(delta, "delta_version", lambda path: versions[Path(path).name])
    name = "orders_with_rates_microbatch_sensor"

    waiting = _tick(defs, name, instance, None, lake_root)
    assert not waiting.run_requests
    assert waiting.skip_message.startswith("waiting for rates and orders: no Delta table yet")

    versions.update(orders=5, rates=3)
    first = _tick(defs, name, instance, None, lake_root)
    [rr] = first.run_requests
    assert rr.run_key == "orders_with_rates:rates-v3:orders-v5"
    assert rr.tags["tj/mode"] == "microbatch"
    assert json.loads(first.cursor) == {"rates": 3, "orders": 5}

    same = _tick(defs, name, instance, first.cursor, lake_root)
    assert not same.run_requests
    assert same.skip_message == "rates at v3, orders at v5: nothing new since the last batch"

    versions["rates"] = 4
    run = create_run_for_test(instance, job_name="orders_with_rates_microbatch",
                              status=dg.DagsterRunStatus.STARTED)
    busy = _tick(defs, name, instance, first.cursor, lake_root)
    assert not busy.run_requests
    assert busy.skip_message.startswith(f"micro-batch run {run.run_id[:8]} is still in progress")
    assert busy.cursor == first.cursor  # the change is not consumed while skipped

    instance.report_run_failed(run)
    nxt = _tick(defs, name, instance, first.cursor, lake_root)
    assert nxt.run_requests[0].run_key == "orders_with_rates:rates-v4:orders-v5"
    assert json.loads(nxt.cursor) == {"rates": 4, "orders": 5}


def test_landing_sensor_shows_the_files_waiting(defs, instance, lake_root: Path) -> None:
    folder = lake_root / "landing" / "orders"
    _land(folder, "0000-orders.jsonl")
    _land(folder, "0001-orders.jsonl")
    tick = _tick(defs, "orders_landing_sensor", instance, None, lake_root)
    [event] = tick.asset_events
    assert event.asset_key == dg.AssetKey("orders_landing")
    md = {k: v.value for k, v in event.metadata.items()}
    assert (md["files"], md["files_waiting"], md["files_ingested"]) == (2, 2, 0)
    assert "`0001-orders.jsonl`" in md["waiting"]


def test_staleness_sensor_checks_the_late_data_horizon_after_micro_batches(
        instance, lake_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from joins.core.time import DAY_MS
    from joins.operators.stream_table_join.pipeline import StreamTableJoinEngine
    from joins.pipeline import observe

    days = ["2024-03-01", "2024-03-02", "2024-03-03"]
    monkeypatch.setattr(observe, "day_rows", lambda layout: dict.fromkeys(days, 5))
    stream_time = 19_785 * DAY_MS + 3_600_000  # 2024-03-03 01:00 UTC
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time", lambda self: stream_time)
    defs = build_definitions([DEMO_SPEC], lake_root=str(lake_root))
    name = "orders_with_rates_staleness_sensor"
    assert defs.resolve_sensor_def(name).job_name == "orders_with_rates_checks"

    assert _tick(defs, name, instance, None, lake_root).skip_message == \
        "nothing materialized orders_with_rates yet"
    instance.report_runless_asset_event(dg.AssetMaterialization(
        "orders_with_rates", partition="2024-03-03", tags={"tj/mode": "microbatch"}))
    first = _tick(defs, name, instance, None, lake_root)
    [rr] = first.run_requests
    # History retention is 24 h: late data can still change 03-02 and 03-03.
    assert (rr.tags["dagster/asset_partition_range_start"],
            rr.tags["dagster/asset_partition_range_end"]) == ("2024-03-02", "2024-03-03")
    again = _tick(defs, name, instance, first.cursor, lake_root)
    assert not again.run_requests and again.skip_message.startswith(
        "no materialization of orders_with_rates since the last check")

    instance.report_runless_asset_event(dg.AssetMaterialization(
        "orders_with_rates", partition="2024-03-02", tags={"tj/mode": "backfill"}))
    backfilled = _tick(defs, name, instance, first.cursor, lake_root)
    assert not backfilled.run_requests and backfilled.cursor != first.cursor
    assert "backfill" in backfilled.skip_message

    instance.report_runless_asset_event(dg.AssetMaterialization(
        "orders_with_rates", partition="2024-03-03", tags={"tj/mode": "microbatch"}))
    run = create_run_for_test(instance, job_name="orders_with_rates_checks",
                              status=dg.DagsterRunStatus.STARTED)
    busy = _tick(defs, name, instance, backfilled.cursor, lake_root)
    assert not busy.run_requests and run.run_id[:8] in busy.skip_message


def _a_started_microbatch_run(defs, instance, lake_root: Path,
                              monkeypatch: pytest.MonkeyPatch) -> tuple[str, str | None, Any]:
    """The micro-batch sensor's name, its cursor after requesting v3 of both inputs, and a
    started run of its job."""
    from joins import lake as delta

    monkeypatch.setattr(delta, "delta_version", lambda path: 3)
    name = "orders_with_rates_microbatch_sensor"
    cursor = _tick(defs, name, instance, None, lake_root).cursor
    run = create_run_for_test(instance, job_name="orders_with_rates_microbatch",
                              status=dg.DagsterRunStatus.STARTED)
    return name, cursor, run


def _an_ingest_run_given_a_file(defs, instance, lake_root: Path) -> tuple[Path, str | None, Any]:
    """A landed file, the landing sensor's cursor that requested it, and a started run given it."""
    folder = lake_root / "landing" / "orders"
    _land(folder, "0000-orders.jsonl")
    requested = _tick(defs, "orders_landing_sensor", instance, None, lake_root).cursor
    ingest = create_run_for_test(instance, job_name="orders_ingest",
                                 status=dg.DagsterRunStatus.STARTED,
                                 run_config={"ops": {"orders": {"config": {
                                     "files": ["0000-orders.jsonl"]}}}})
    return folder, requested, ingest


def test_the_skip_reasons_name_a_failed_run_whose_work_waits(defs, instance, lake_root: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """What a failed run was given is not new to its sensor on the next tick: the skip reason
    says which run holds it and whether Dagster's run retries will re-execute it."""
    from resources.dagster_private import WILL_RETRY_TAG

    name, cursor, run = _a_started_microbatch_run(defs, instance, lake_root, monkeypatch)
    instance.report_run_failed(run)
    instance.add_run_tags(run.run_id, {WILL_RETRY_TAG: "true"})
    retried = _tick(defs, name, instance, cursor, lake_root)
    assert not retried.run_requests
    assert retried.skip_message == (f"rates at v3, orders at v3: nothing new since the last batch, "
                                    f"whose run {run.run_id[:8]} failed; Dagster re-executes it "
                                    f"(run_retries)")
    instance.add_run_tags(run.run_id, {WILL_RETRY_TAG: "false"})
    assert _tick(defs, name, instance, cursor, lake_root).skip_message.endswith(
        f"whose run {run.run_id[:8]} failed and is not retried again; re-execute it from its run "
        f"page once its error is fixed")
    # A later run that succeeded: nothing waits.
    create_run_for_test(instance, job_name="orders_with_rates_microbatch",
                        status=dg.DagsterRunStatus.SUCCESS)
    assert _tick(defs, name, instance, cursor, lake_root).skip_message == (
        "rates at v3, orders at v3: nothing new since the last batch")

    folder, requested, ingest = _an_ingest_run_given_a_file(defs, instance, lake_root)
    waiting = _tick(defs, "orders_landing_sensor", instance, requested, lake_root)
    assert waiting.skip_message == f"no new files in {folder}"      # its run is still going
    instance.report_run_failed(ingest)
    instance.add_run_tags(ingest.run_id, {WILL_RETRY_TAG: "false"})
    # A later run given other files succeeded: the failed one's file still waits.
    create_run_for_test(instance, job_name="orders_ingest", status=dg.DagsterRunStatus.SUCCESS,
                        run_config={"ops": {"orders": {"config": {"files": ["0001-orders.jsonl"]}}}})
    assert _tick(defs, "orders_landing_sensor", instance, requested, lake_root).skip_message == (
        f"no new files in {folder}; 1 requested file(s) not ingested: run {ingest.run_id[:8]} "
        f"failed and is not retried again; re-execute it from its run page once its error is "
        f"fixed")


def test_the_skip_reasons_name_a_canceled_run_whose_work_waits(defs, instance, lake_root: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Run retries re-execute failures only: a canceled run's work waits for a person, and the
    skip reasons say so."""
    name, cursor, run = _a_started_microbatch_run(defs, instance, lake_root, monkeypatch)
    instance.report_run_canceled(run)
    assert _tick(defs, name, instance, cursor, lake_root).skip_message == (
        f"rates at v3, orders at v3: nothing new since the last batch, whose run "
        f"{run.run_id[:8]} was canceled; re-execute it from its run page")

    folder, requested, ingest = _an_ingest_run_given_a_file(defs, instance, lake_root)
    instance.report_run_canceled(ingest)
    assert _tick(defs, "orders_landing_sensor", instance, requested, lake_root).skip_message == (
        f"no new files in {folder}; 1 requested file(s) not ingested: run {ingest.run_id[:8]} "
        f"was canceled; re-execute it from its run page")
