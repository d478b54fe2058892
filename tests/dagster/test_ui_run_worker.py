"""A two-day backfill launched the way the UI launches a run (the `launchRun` GraphQL mutation
against the code location of `workspace.yaml`, through the instance's run launcher), with the
warm run worker `./tj dev` starts (`runplatform.run_worker`): the run executes in the worker's
process, every step on its one classic SparkSession, with no process start and no Spark
Connect hop. What that saves a user (the time from the launch to the run's end against the
demo's in-process backfill of the same days) is measured by bench/ui_runs.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets
from pipelines.definitions import DEMO_SPEC
from pipelines.factory import backfill_job_name
from resources.spark import SESSION_LOG_PREFIX
from runplatform.launcher import WORKER_TAG
from runplatform.ui_launch import (
    REPO,
    WARM_WORKER_LAUNCHER,
    launch_like_the_ui,
    run_seconds,
    wait_for_warm_worker,
)
from runplatform.warm_up import DAYS
from tests.dagster.test_ui_launched_backfill import demo_home, one_wave_sample

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_ui_launched_backfill_runs_in_the_warm_worker(
        spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Runs go through the launcher ./tj dev configures.
    root, home, env = demo_home(tmp_path, monkeypatch, launcher=WARM_WORKER_LAUNCHER)
    instance = dg.DagsterInstance.get()
    log = tmp_path / "run-worker.log"
    proc = None
    try:
        one_wave_sample(root, instance)
        job = backfill_job_name(build_pipeline_assets(DEMO_SPEC).spec)
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "runplatform.run_worker"], cwd=REPO,
                                    env={**os.environ, **env}, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        worker_pid = wait_for_warm_worker(home, proc, log)
        # The warm-up ran the one backfill TJ_WARM_UP_BACKFILLS asked for (demo_home).
        said = re.findall(r"run worker warm in \d+ s \(sample backfills: ([^)]*)\)",
                          log.read_text())
        assert len(said) == 1 and len(said[0].split(", ")) == 1, said
        run_id, clicked = launch_like_the_ui(instance, job, DAYS)
        run = instance.get_run_by_id(run_id)
        assert run is not None
        logs = instance.all_logs(run_id)
        failures = [e.message for e in logs if e.dagster_event and e.dagster_event.is_failure]
        assert run.status == dg.DagsterRunStatus.SUCCESS, failures or run.status
        elsewhere = [e.message for e in logs if "A process of its own" in e.message]
        assert run.tags.get(WORKER_TAG) == str(worker_pid), elsewhere

        # Every step ran in the worker's process, on its one (classic) session.
        steps = {e.step_key for e in logs
                 if e.dagster_event and e.dagster_event.event_type_value == "STEP_SUCCESS"}
        sessions = {e.step_key: e.user_message.removeprefix(SESSION_LOG_PREFIX).strip()
                    for e in logs if e.user_message.startswith(SESSION_LOG_PREFIX)}
        assert len(steps) >= 4, steps
        assert set(sessions) == steps, f"steps without a session line: {steps - set(sessions)}"
        assert len(set(sessions.values())) == 1, sessions
        assert f"process {worker_pid}," in next(iter(sessions.values()))
        days = sorted(e.dagster_event.partition for e in logs if e.dagster_event
                      and e.dagster_event.event_type_value == "ASSET_MATERIALIZATION")
        assert days == ["2024-03-01", "2024-03-02"]

        run_s, click_s = run_seconds(instance, run_id, clicked)
        assert 0 < run_s <= click_s, (run_s, click_s)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        assert not (home / "run-worker.json").exists(), "the worker did not remove its address"
        instance.dispose()
