"""A two-day backfill launched the way the UI launches a run: the `launchRun` GraphQL mutation
against the code location of `workspace.yaml`, through the instance's run coordinator and run
launcher (a run worker process that loads the code location, as `dagster dev` does). Every step
of that run (the join's backfill and its asset checks) logs which SparkSession it used: one
session must have served them all (the in-process executor `build_definitions` sets), not one
JVM per step. As under `./tj dev`, the run worker attaches to a warm local Spark Connect server
(`runplatform.dev.warm_spark`) instead of starting a JVM; the test prints the run's times."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from assets.factory import build_pipeline_assets
from pipelines.definitions import DEMO_SPEC
from pipelines.factory import backfill_job_name
from resources import SparkResource
from resources.spark import SESSION_LOG_PREFIX
from runplatform.dev import warm_spark
from runplatform.warm_up import DAYS, sample_lake

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LOCATION, REPOSITORY = "pipelines.definitions", "__repository__"
LAUNCH = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message stack }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
  }
}"""


def _wait(instance: dg.DagsterInstance, run_id: str, timeout_s: float = 600) -> dg.DagsterRun:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        assert run is not None
        if run.is_finished:
            return run
        time.sleep(2)
    raise AssertionError(f"run {run_id} did not finish within {timeout_s:.0f} s")


def _launch_and_wait(instance: dg.DagsterInstance, job: str,
                     tags: dict[str, str]) -> tuple[str, float]:
    """Launch as the UI does and wait for the run; the code server (and with it the run worker
    it started) lives as long as the workspace, so the wait is inside it."""
    from dagster_graphql.test.utils import execute_dagster_graphql

    from resources.dagster_private import WorkspaceFileTarget, WorkspaceProcessContext

    params = {"selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY,
                           "jobName": job},
              "runConfigData": {},
              "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}
    target = WorkspaceFileTarget(paths=[str(REPO / "workspace.yaml")])
    with WorkspaceProcessContext(instance, target) as workspace:
        clicked = time.time()   # the code server is up, as under `dagster dev`
        result = execute_dagster_graphql(workspace.create_request_context(), LAUNCH,
                                         variables={"params": params})
        assert not result.errors, result.errors
        launched = result.data["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        _wait(instance, run_id)
    return run_id, clicked


def demo_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
              launcher: str = "") -> tuple[Path, Path, dict[str, str]]:
    """(lake root, Dagster home, the environment the code location and run workers read: both
    are other processes) for the demo spec; runs are launched at once (the queue, Dagster's
    default, needs the daemon to dequeue them), through `launcher` (YAML) or the default one."""
    root, home, specs = tmp_path / "lake", tmp_path / "dagster_home", tmp_path / "specs"
    home.mkdir()
    specs.mkdir()
    # The demo's join with its sources inline: one self-contained file (the folder's own names
    # the shared `orders` source defined in another file).
    (specs / "orders_with_rates.yaml").write_text(yaml.safe_dump(DEMO_SPEC, sort_keys=False))
    env = {"TJ_LAKE_ROOT": str(root), "TJ_SPECS_DIR": str(specs), "TJ_SHUFFLE_PARTITIONS": "2",
           "DAGSTER_HOME": str(home)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\nrun_coordinator:\n  module: dagster.core.run_coordinator\n"
        "  class: DefaultRunCoordinator\n" + launcher)
    return root, home, env


def test_two_day_backfill_launched_like_the_ui_uses_one_spark_session(
        spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default run launcher, as under `dagster dev`: a run worker process per run.
    root, _home, _env = demo_home(tmp_path, monkeypatch)
    instance = dg.DagsterInstance.get()
    try:
        sample_lake(root, instance, SparkResource(shuffle_partitions=2))
        job = backfill_job_name(build_pipeline_assets(DEMO_SPEC).spec)
        # As under `./tj dev`: runs attach to one local Spark Connect server, which the demo's
        # jobs warmed up on a sample in the background (the test waits for that first).
        with warm_spark(tmp_path / "spark-connect") as warm:
            assert "TJ_SPARK_REMOTE" in warm.env, "the dev server was not started"
            started = time.monotonic()
            warm.wait_warm()
            warm_s = time.monotonic() - started
            monkeypatch.setenv("TJ_SPARK_REMOTE", warm.env["TJ_SPARK_REMOTE"])
            started = time.monotonic()
            run_id, clicked = _launch_and_wait(instance, job, DAYS)
            elapsed = time.monotonic() - started
            # The server's JVM keeps its temporary files where its stop removes them.
            assert list((tmp_path / "spark-connect").glob("tmp-*/blockmgr-*"))
        assert not list((tmp_path / "spark-connect").glob("tmp-*")), "temporary files left"
        run = instance.get_run_by_id(run_id)
        assert run is not None
        logs = instance.all_logs(run_id)
        failures = [e.message for e in logs if e.dagster_event and e.dagster_event.is_failure]
        assert run.status == dg.DagsterRunStatus.SUCCESS, failures or run.status

        # The launcher started a worker process, on the warm server: not the test's session.
        steps = {e.step_key for e in logs
                 if e.dagster_event and e.dagster_event.event_type_value == "STEP_SUCCESS"}
        sessions = {e.step_key: e.user_message.removeprefix(SESSION_LOG_PREFIX).strip()
                    for e in logs if e.user_message.startswith(SESSION_LOG_PREFIX)}
        assert len(steps) >= 4, steps   # the join's backfill and its three checks
        assert set(sessions) == steps, f"steps without a session line: {steps - set(sessions)}"
        assert len(set(sessions.values())) == 1, sessions
        assert f"process {os.getpid()}," not in next(iter(sessions.values()))
        assert "application connect-" in next(iter(sessions.values()))

        days = sorted(e.dagster_event.partition for e in logs if e.dagster_event
                      and e.dagster_event.event_type_value == "ASSET_MATERIALIZATION")
        assert days == ["2024-03-01", "2024-03-02"]
        monkeypatch.delenv("TJ_SPARK_REMOTE")
        record = instance.get_run_record_by_id(run_id)
        assert record is not None and record.start_time and record.end_time
        worker_s = record.end_time - record.start_time
        click_s = record.end_time - clicked

        # Where the run worker's time went: before the first step (process start, code
        # location load), and each step (the first one starts the SparkSession).
        marks = [(e.timestamp, e.dagster_event.event_type_value, e.step_key) for e in logs
                 if e.dagster_event and e.dagster_event.event_type_value in
                 ("RUN_START", "STEP_START", "STEP_SUCCESS", "RUN_SUCCESS")]
        starts = {k: t for t, kind, k in marks if kind == "STEP_START"}
        first_step = min(starts.values())
        print("run worker: " + ", ".join(
            [f"until the first step {first_step - record.start_time:.1f} s"]
            + [f"{k} {t - starts[k]:.1f} s" for t, kind, k in marks if kind == "STEP_SUCCESS"]))
        # What a user waits for (not asserted, nor compared here: a timed test is no benchmark).
        print(f"UI-launched two-day backfill on the warm server (after a {warm_s:.0f} s warm-up): "
              f"the run {worker_s:.1f} s (its duration in the UI), {click_s:.1f} s from the "
              f"launch to its end (a run worker process starts and loads the code location), "
              f"{elapsed:.1f} s with the test's own code server start")
    finally:
        instance.dispose()
