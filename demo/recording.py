"""Runs and sensor ticks executed in this process, recorded in the Dagster instance as if the
daemon and the UI's code location had made them, so the UI files them under their job, sensor and
schedule (the demo's history then shows per job, per sensor with its cursor, per schedule).

The UI attaches a run to a job by the run's code location (`remote_job_origin`, and the
`.dagster/repository` tag), and shows a sensor's ticks and cursor from the instigator state and
tick records of its origin. Here the origin is that of `workspace.yaml` (what `./tj dev` loads),
built without starting a code server; runs execute in this process (`execute_run` on the
in-memory job: the warm SparkSession serves every run) and ticks are recorded the way the
daemon's sensor loop records them (`dagster._daemon.sensor`): a started tick, its evaluation, its
runs, then the finished tick and the instigator's new cursor. These are Dagster internals
(pinned version); the recording tests (`tests/dagster/test_recording.py`) hold them to what the
UI reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dagster import DagsterInstance, Definitions, JobDefinition, RunRequest

from resources.dagster_private import (
    REPOSITORY_LABEL_TAG,
    RUN_KEY_TAG,
    SCHEDULE_NAME_TAG,
    SENSOR_NAME_TAG,
    InMemoryJob,
    InstigatorState,
    InstigatorStatus,
    InstigatorType,
    RemoteInstigatorOrigin,
    RemoteRepositoryOrigin,
    ScheduleInstigatorData,
    SensorInstigatorData,
    TickData,
    TickStatus,
    create_execution_plan,
    execute_run,
    location_origins_from_yaml_paths,
)

REPO = Path(__file__).resolve().parents[1]
REPOSITORY = "__repository__"   # the repository name Dagster gives a module's `Definitions`


class Recorder:
    """Records ticks and runs of the code location loaded from `workspace` into `instance`."""

    def __init__(self, instance: DagsterInstance, workspace: Path = REPO / "workspace.yaml") -> None:
        [location] = location_origins_from_yaml_paths([str(workspace)])
        self.instance = instance
        self.repository = RemoteRepositoryOrigin(location, REPOSITORY)

    @property
    def label(self) -> str:
        return self.repository.get_label()

    def origin(self, name: str) -> RemoteInstigatorOrigin:
        return self.repository.get_instigator_origin(name)

    def state(self, name: str, kind: InstigatorType, data: Any) -> InstigatorState:
        """The instigator's stored state, created as running when there is none."""
        origin = self.origin(name)
        state = self.instance.get_instigator_state(origin.get_id(), origin.get_selector().get_id())
        if state is None:
            state = InstigatorState(origin, kind, InstigatorStatus.RUNNING, data)
            self.instance.add_instigator_state(state)
        return state

    def reset(self, name: str, kind: InstigatorType, data: Any) -> None:
        """Start an instigator afresh: running, its data (cursor) replaced by `data`."""
        state = self.state(name, kind, data)
        self.instance.update_instigator_state(
            InstigatorState(state.origin, kind, InstigatorStatus.RUNNING, data))

    def reset_pipelines(self, defs: Definitions) -> None:
        """The lake of `defs` was wiped: forget what the instance knew of its assets (events,
        check verdicts) and start every sensor and schedule afresh (no cursor), turned on."""
        self.instance.wipe_assets(list(defs.resolve_asset_graph().get_all_asset_keys()))
        repo = defs.get_repository_def()
        for sensor in repo.sensor_defs:
            self.reset(sensor.name, InstigatorType.SENSOR,
                       SensorInstigatorData(min_interval=sensor.minimum_interval_seconds))
        for schedule in repo.schedule_defs:
            self.reset(schedule.name, InstigatorType.SCHEDULE,
                       ScheduleInstigatorData(schedule.cron_schedule, time.time()))

    def turn_on(self, defs: Definitions) -> None:
        """Every sensor and schedule of `defs` running, keeping the cursors they have (a lake
        that was kept: its sensors go on where they stopped)."""
        repo = defs.get_repository_def()
        for sensor in repo.sensor_defs:
            state = self.state(sensor.name, InstigatorType.SENSOR,
                               SensorInstigatorData(min_interval=sensor.minimum_interval_seconds))
            self.instance.update_instigator_state(state.with_status(InstigatorStatus.RUNNING))
        for schedule in repo.schedule_defs:
            state = self.state(schedule.name, InstigatorType.SCHEDULE,
                               ScheduleInstigatorData(schedule.cron_schedule, time.time()))
            self.instance.update_instigator_state(state.with_status(InstigatorStatus.RUNNING))

    def sensor_tick(self, name: str, min_interval: int,
                    evaluate: Callable[[str | None], Any]) -> tuple[Any, Callable[[str, str | None], None]]:
        """Evaluate a sensor with its stored cursor and record the tick. Returns the evaluation
        (`SensorExecutionData`) and `ran(run_id, run_key)`, to call for each run it requested
        once the run exists."""
        state = self.state(name, InstigatorType.SENSOR, SensorInstigatorData(min_interval=min_interval))
        data = state.instigator_data
        cursor = data.cursor if isinstance(data, SensorInstigatorData) else None
        origin = self.origin(name)
        now = time.time()
        tick = self.instance.create_tick(TickData(
            instigator_origin_id=origin.get_id(), instigator_name=name,
            instigator_type=InstigatorType.SENSOR, status=TickStatus.STARTED, timestamp=now,
            selector_id=origin.get_selector().get_id()))
        result = evaluate(cursor)
        for event in result.asset_events or []:
            self.instance.report_runless_asset_event(event)
        requests = list(result.run_requests or [])
        status = TickStatus.SUCCESS if requests else TickStatus.SKIPPED
        tick = tick.with_status(status, end_timestamp=time.time())
        if result.skip_message:
            tick = tick.with_reason(skip_reason=result.skip_message)
        new_cursor = result.cursor if result.cursor is not None else cursor
        if new_cursor:
            tick = tick.with_cursor(new_cursor)
        self.instance.update_tick(tick)
        last_key = next((r.run_key for r in reversed(requests) if r.run_key), None)
        self.instance.update_instigator_state(state.with_data(SensorInstigatorData(
            last_tick_timestamp=now, last_run_key=last_key, min_interval=min_interval,
            cursor=new_cursor, last_tick_start_timestamp=now, last_tick_success_timestamp=time.time())))
        box = {"tick": tick}

        def ran(run_id: str, run_key: str | None) -> None:
            box["tick"] = box["tick"].with_run_info(run_id, run_key)
            self.instance.update_tick(box["tick"])

        return result, ran

    def schedule_tick(self, name: str, cron: str, request: RunRequest | None,
                      skip: str | None) -> Callable[[str, str | None], None]:
        """Record a schedule tick that asked for `request` (or was skipped with `skip`)."""
        state = self.state(name, InstigatorType.SCHEDULE, ScheduleInstigatorData(cron, time.time()))
        origin = self.origin(name)
        now = time.time()
        tick = self.instance.create_tick(TickData(
            instigator_origin_id=origin.get_id(), instigator_name=name,
            instigator_type=InstigatorType.SCHEDULE,
            status=TickStatus.SUCCESS if request else TickStatus.SKIPPED, timestamp=now,
            selector_id=origin.get_selector().get_id(), skip_reason=skip, end_timestamp=now,
            run_ids=[], run_keys=[]))
        self.instance.update_instigator_state(state.with_data(
            ScheduleInstigatorData(cron, getattr(state.instigator_data, "start_timestamp", None), now)))
        box = {"tick": tick}

        def ran(run_id: str, run_key: str | None) -> None:
            box["tick"] = box["tick"].with_run_info(run_id, run_key)
            self.instance.update_tick(box["tick"])

        return ran

    def run_tags(self, *, sensor: str | None = None, schedule: str | None = None,
                 request: RunRequest | None = None) -> dict[str, str]:
        tags = {REPOSITORY_LABEL_TAG: self.label}
        if request is not None:
            tags.update(request.tags or {})
            if request.run_key:
                tags[RUN_KEY_TAG] = request.run_key
        if sensor:
            tags[SENSOR_NAME_TAG] = sensor
        if schedule:
            tags[SCHEDULE_NAME_TAG] = schedule
        return tags

    def execute(self, job: JobDefinition, *, run_config: Mapping[str, Any],
                tags: Mapping[str, str]) -> Any:
        """Create the run under the code location's job and execute it here (its steps in this
        process, the job's in-process executor); returns the `JobExecutionResult`."""
        in_memory = InMemoryJob(job)
        all_tags = {**job.run_tags, **tags, REPOSITORY_LABEL_TAG: self.label}
        plan = create_execution_plan(in_memory, run_config=run_config, tags=all_tags,
                                     instance_ref=self.instance.get_ref())
        run = self.instance.create_run_for_job(
            job_def=job, execution_plan=plan, run_config=run_config, tags=all_tags,
            remote_job_origin=self.repository.get_job_origin(job.name))
        return execute_run(in_memory, run, self.instance)
