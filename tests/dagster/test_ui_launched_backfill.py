"""A two-day backfill launched the way the UI launches a run: the `launchRun` GraphQL mutation
against the code location of `workspace.yaml`, through the instance's run coordinator and run
launcher (a run worker process that loads the code location, as `dagster dev` does). Every step
of that run (the join's backfill and its asset checks) logs which SparkSession it used: one
session must have served them all (the in-process executor `build_definitions` sets), not one
JVM per step. As under `./tj dev`, the run worker attaches to a warm local Spark Connect server
(`runplatform.dev.warm_spark`) instead of starting a JVM. What the run costs a user is measured
by bench/ui_runs.py, not here."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets
from pipelines.definitions import DEMO_SPEC
from pipelines.factory import backfill_job_name
from resources import SparkResource
from resources.spark import SESSION_LOG_PREFIX
from runplatform.dev import warm_spark
from runplatform.ui_launch import demo_instance, launch_like_the_ui, run_seconds
from runplatform.warm_up import DAYS, sample_lake

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def demo_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
              launcher: str = "") -> tuple[Path, Path, dict[str, str]]:
    """`demo_instance` under `tmp_path`, its environment set for the test's own process too.
    A warm-up started from here lands one wave of the sample and runs one backfill, not three
    of each: these tests prove that it runs and that runs go where they should, not how warm
    the JIT gets (bench/ui_runs.py measures that, with the full warm-up)."""
    root, home, env = demo_instance(tmp_path, launcher=launcher)
    for key, value in {**env, "TJ_WARM_UP_BACKFILLS": "1", "TJ_WARM_UP_WAVES": "1"}.items():
        monkeypatch.setenv(key, value)
    return root, home, env


def one_wave_sample(root: Path, instance: dg.DagsterInstance) -> None:
    """The sample lake the launched backfill reads, in one wave, as the warm-up lands it."""
    sample_lake(root, instance, SparkResource(shuffle_partitions=2), waves=1)


def test_two_day_backfill_launched_like_the_ui_uses_one_spark_session(
        spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default run launcher, as under `dagster dev`: a run worker process per run.
    root, _home, _env = demo_home(tmp_path, monkeypatch)
    instance = dg.DagsterInstance.get()
    try:
        one_wave_sample(root, instance)
        job = backfill_job_name(build_pipeline_assets(DEMO_SPEC).spec)
        # As under `./tj dev`: runs attach to one local Spark Connect server, which the demo's
        # jobs warmed up on a sample in the background (the test waits for that first).
        with warm_spark(tmp_path / "spark-connect") as warm:
            assert "TJ_SPARK_REMOTE" in warm.env, "the dev server was not started"
            warm.wait_warm()
            monkeypatch.setenv("TJ_SPARK_REMOTE", warm.env["TJ_SPARK_REMOTE"])
            run_id, clicked = launch_like_the_ui(instance, job, DAYS)
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
        run_s, click_s = run_seconds(instance, run_id, clicked)
        assert 0 < run_s <= click_s, (run_s, click_s)
    finally:
        instance.dispose()
