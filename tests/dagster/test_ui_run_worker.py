"""A two-day backfill launched the way the UI launches a run (the `launchRun` GraphQL mutation
against the code location of `workspace.yaml`, through the instance's run launcher), with the
warm run worker `./tj dev` starts (`runplatform.run_worker`): the run executes in the worker's
process, every step on its one classic SparkSession, with no process start and no Spark
Connect hop. The test prints the time from the launch to the run's end against the demo's
in-process backfill of the same days (issue 13: at most 1.5x)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets
from pipelines.definitions import DEMO_SPEC, build_definitions
from pipelines.factory import backfill_job_name
from resources import SparkResource
from resources.spark import SESSION_LOG_PREFIX
from runplatform.launcher import WORKER_TAG, worker_url
from runplatform.warm_up import DAYS, QUIET, sample_lake
from tests.dagster.test_ui_launched_backfill import REPO, _launch_and_wait, demo_home

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _wait_warm(home: Path, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 600) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run worker died:\n{log.read_text()[-3000:]}"
        url = worker_url(home)
        if url is not None:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                health = json.loads(response.read())
            assert health["warm_error"] is None, health["warm_error"]
            if health["warm"]:
                return int(health["pid"])
        time.sleep(1)
    raise AssertionError(f"the run worker was not warm within {timeout_s:.0f} s")


def test_a_ui_launched_backfill_runs_in_the_warm_worker(
        spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Runs go through the launcher ./tj dev configures.
    root, home, env = demo_home(tmp_path, monkeypatch, launcher=(
        "run_launcher:\n  module: runplatform.launcher\n  class: WarmWorkerRunLauncher\n"))
    instance = dg.DagsterInstance.get()
    log = tmp_path / "run-worker.log"
    proc = None
    try:
        sample_lake(root, instance, SparkResource(shuffle_partitions=2))
        job = backfill_job_name(build_pipeline_assets(DEMO_SPEC).spec)
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "runplatform.run_worker"], cwd=REPO,
                                    env={**os.environ, **env}, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        worker_pid = _wait_warm(home, proc, log)
        run_id, clicked = _launch_and_wait(instance, job, DAYS)
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

        record = instance.get_run_record_by_id(run_id)
        assert record is not None and record.start_time and record.end_time
        run_s, click_s = record.end_time - record.start_time, record.end_time - clicked
        defs = build_definitions([DEMO_SPEC], lake_root=str(root),
                                 spark=SparkResource(shuffle_partitions=2))
        started = time.monotonic()
        assert defs.resolve_job_def(job).execute_in_process(
            instance=instance, run_config=QUIET, tags=DAYS).success
        demo_s = time.monotonic() - started
        print(f"UI-launched two-day backfill in the warm run worker: the run {run_s:.1f} s, "
              f"{click_s:.1f} s from the launch to its end; the demo's in-process backfill of "
              f"the same days {demo_s:.1f} s; ratios {run_s / demo_s:.2f} (run) / "
              f"{click_s / demo_s:.2f} (launch to end)")
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        assert not (home / "run-worker.json").exists(), "the worker did not remove its address"
        instance.dispose()
