"""The live demo keeps its lake from run to run (issue 25, point 5): the seeded generator goes on
after the last wave landed, and the sensors go on from their cursors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg

from demo.live_data import LiveConfig, LiveGenerator
from demo.live_demo import landed_waves
from demo.recording import Recorder
from demo.sample_data import write_wave
from pipelines.definitions import DEMO_SPEC, build_definitions
from resources.dagster_private import InstigatorStatus, InstigatorType, SensorInstigatorData


def test_a_kept_lake_goes_on_with_the_waves_an_uninterrupted_run_lands(tmp_path: Path) -> None:
    orders, rates = tmp_path / "orders", tmp_path / "rates"
    assert landed_waves(orders) == 0
    first = LiveGenerator(LiveConfig())
    for _ in range(3):
        write_wave(first.next_wave(), orders_dir=orders, rates_dir=rates)
    (orders / ".0003-orders.jsonl.tmp").write_text("")   # half written: not a landed wave
    assert landed_waves(orders) == 3
    resumed = LiveGenerator(LiveConfig())
    for _ in range(landed_waves(orders)):
        resumed.next_wave()
    assert dataclasses.asdict(resumed.next_wave()) == dataclasses.asdict(first.next_wave())


def test_turn_on_keeps_the_sensors_cursors(tmp_path: Path) -> None:
    defs = build_definitions([DEMO_SPEC], lake_root=str(tmp_path))
    with dg.instance_for_test() as instance:
        recorder = Recorder(instance)
        name = "orders_landing_sensor"
        state = recorder.state(name, InstigatorType.SENSOR,
                               SensorInstigatorData(min_interval=5, cursor='{"through": "0007"}'))
        instance.update_instigator_state(state.with_status(InstigatorStatus.STOPPED))
        recorder.turn_on(defs)
        after = recorder.state(name, InstigatorType.SENSOR, SensorInstigatorData(min_interval=5))
        assert after.status == InstigatorStatus.RUNNING
        assert after.instigator_data.cursor == '{"through": "0007"}'
        schedules = defs.get_repository_def().schedule_defs
        assert schedules and all(
            recorder.state(s.name, InstigatorType.SCHEDULE, None).status == InstigatorStatus.RUNNING
            for s in schedules)
