"""Runs and ticks the demo records are filed where the UI looks for them: a run under its job in
the code location `workspace.yaml` loads (the job page's query), a sensor's ticks, runs and
cursor under the sensor's origin, a schedule's tick under the schedule; and a reset forgets the
cursors and the assets' history of a wiped lake."""

from __future__ import annotations

import dagster as dg

from demo.recording import Recorder
from resources.dagster_private import (
    REPOSITORY_LABEL_TAG,
    SENSOR_NAME_TAG,
    InstigatorSelector,
    InstigatorType,
    TickStatus,
)

LOCATION = "pipelines.definitions"


@dg.op
def noop() -> None:
    pass


# The project's jobs run their steps in one process (a run's SparkSession serves every step).
@dg.job(executor_def=dg.in_process_executor)
def copy_job() -> None:
    noop()


@dg.sensor(job=copy_job, minimum_interval_seconds=30)
def files_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    seen = int(context.cursor or 0)
    if seen >= 2:
        return dg.SkipReason("no new files")
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=f"file-{seen}")], cursor=str(seen + 1))


def _tick(recorder: Recorder) -> tuple[dg.SensorResult, object]:
    def evaluate(cursor: str | None):
        with dg.build_sensor_context(cursor=cursor) as context:
            return files_sensor.evaluate_tick(context)

    return recorder.sensor_tick("files_sensor", 30, evaluate)


def test_runs_and_ticks_are_filed_under_the_code_location(instance: dg.DagsterInstance) -> None:
    recorder = Recorder(instance)
    assert recorder.label == f"__repository__@{LOCATION}"
    data, ran = _tick(recorder)
    [request] = data.run_requests
    result = recorder.execute(copy_job, run_config={},
                              tags=recorder.run_tags(sensor="files_sensor", request=request))
    assert result.success
    ran(result.run_id, request.run_key)

    # The job page: runs of the job name in this code location.
    [run] = instance.get_runs(dg.RunsFilter(job_name="copy_job",
                                            tags={REPOSITORY_LABEL_TAG: recorder.label}))
    assert run.remote_job_origin is not None
    assert run.remote_job_origin.location_name == LOCATION
    assert run.tags[SENSOR_NAME_TAG] == "files_sensor" and run.tags["dagster/run_key"] == "file-0"

    # The sensor page: state (running, cursor) and ticks by the sensor's selector.
    selector = InstigatorSelector(location_name=LOCATION, repository_name="__repository__",
                                  name="files_sensor").get_id()
    origin = recorder.origin("files_sensor").get_id()
    state = instance.get_instigator_state(origin, selector)
    assert state is not None and state.is_running and state.instigator_data.cursor == "1"
    [tick] = instance.get_ticks(origin, selector)
    assert tick.status == TickStatus.SUCCESS and tick.run_ids == [run.run_id]
    assert tick.cursor == "1" and tick.run_keys == ["file-0"]

    # The next tick starts from the stored cursor.
    data, _ = _tick(recorder)
    assert data.run_requests[0].run_key == "file-1"
    data, _ = _tick(recorder)
    assert not data.run_requests
    latest = instance.get_ticks(origin, selector, limit=1)[0]
    assert latest.status == TickStatus.SKIPPED and latest.skip_reason == "no new files"

    ran = recorder.schedule_tick("nightly", "0 3 * * *", dg.RunRequest(run_key="n"), None)
    ran(run.run_id, "n")
    schedule_origin = recorder.origin("nightly").get_id()
    schedule_selector = InstigatorSelector(location_name=LOCATION, repository_name="__repository__",
                                           name="nightly").get_id()
    [stick] = instance.get_ticks(schedule_origin, schedule_selector)
    assert stick.status == TickStatus.SUCCESS and stick.run_ids == [run.run_id]


def test_reset_forgets_cursors_and_the_history_of_a_wiped_lake(instance: dg.DagsterInstance) -> None:
    recorder = Recorder(instance)
    _tick(recorder)
    instance.report_runless_asset_event(dg.AssetMaterialization("joined"))
    defs = dg.Definitions(assets=[dg.AssetSpec("joined")], jobs=[copy_job], sensors=[files_sensor])
    recorder.reset_pipelines(defs)
    origin = recorder.origin("files_sensor")
    state = instance.get_instigator_state(origin.get_id(), origin.get_selector().get_id())
    assert state.is_running and state.instigator_data.cursor is None
    assert state.instigator_type == InstigatorType.SENSOR
    assert instance.get_latest_materialization_event(dg.AssetKey("joined")) is None
