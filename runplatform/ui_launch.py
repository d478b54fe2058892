"""Launch a run the way the Dagster UI does: the `launchRun` GraphQL mutation against the code
location of `workspace.yaml`, through the instance's run coordinator and run launcher. The
tests of the UI's runs (tests/dagster/test_ui_run_worker.py, test_ui_launched_backfill.py) and
the benchmark of their latency (bench/ui_runs.py) share it, so both take the path a user's click
takes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import dagster as dg

REPO = Path(__file__).resolve().parents[1]
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
# The instance's runs start at once: the queue (Dagster's default) needs the daemon to dequeue.
IMMEDIATE_COORDINATOR = ("run_coordinator:\n  module: dagster.core.run_coordinator\n"
                         "  class: DefaultRunCoordinator\n")
WARM_WORKER_LAUNCHER = ("run_launcher:\n  module: runplatform.launcher\n"
                        "  class: WarmWorkerRunLauncher\n")


def write_instance_config(home: Path, *, launcher: str = "") -> None:
    """`home/dagster.yaml`: no telemetry, runs launched at once, through `launcher` (YAML, e.g.
    WARM_WORKER_LAUNCHER) or Dagster's default (a run worker process per run)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n" + IMMEDIATE_COORDINATOR
                                       + launcher)


def demo_instance(base: Path, *, launcher: str = "") -> tuple[Path, Path, dict[str, str]]:
    """A Dagster home and lake under `base` for the demo pipeline: (lake root, Dagster home, the
    environment the code location and its run workers must read, other processes as they are).
    Its specs folder holds the demo's join with its sources inline, one self-contained file."""
    import yaml

    from pipelines.definitions import DEMO_SPEC

    root, home, specs = base / "lake", base / "dagster_home", base / "specs"
    specs.mkdir(parents=True)
    (specs / "orders_with_rates.yaml").write_text(yaml.safe_dump(DEMO_SPEC, sort_keys=False))
    write_instance_config(home, launcher=launcher)
    env = {"TJ_LAKE_ROOT": str(root), "TJ_SPECS_DIR": str(specs), "TJ_SHUFFLE_PARTITIONS": "2",
           "DAGSTER_HOME": str(home)}
    return root, home, env


def wait_for_warm_worker(home: Path, proc: subprocess.Popen[bytes], log: Path,
                         timeout_s: float = 600) -> int:
    """Block until the run worker serving `home` (`runplatform.run_worker`, process `proc`,
    writing `log`) says it is warm; returns its pid. Raises with the log's tail if it died or
    its warm-up failed."""
    import json
    import urllib.request

    from runplatform.launcher import worker_url

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the run worker died:\n{log.read_text(errors='replace')[-3000:]}")
        url = worker_url(home)
        if url is not None:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                health = json.loads(response.read())
            if health["warm_error"] is not None:
                raise RuntimeError(f"the run worker's warm-up failed: {health['warm_error']}")
            if health["warm"]:
                return int(health["pid"])
        time.sleep(0.5)
    raise TimeoutError(f"the run worker was not warm within {timeout_s:.0f} s (log {log})")


def wait_for_run(instance: dg.DagsterInstance, run_id: str,
                 timeout_s: float = 600) -> dg.DagsterRun:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        assert run is not None, f"no run {run_id} in the instance"
        if run.is_finished:
            return run
        time.sleep(0.2)
    raise TimeoutError(f"run {run_id} did not finish within {timeout_s:.0f} s")


def launch_like_the_ui(instance: dg.DagsterInstance, job: str, tags: dict[str, str], *,
                       timeout_s: float = 600) -> tuple[str, float]:
    """Launch `job` as the UI's button does and wait for its end; returns (run id, the epoch
    second of the launch). The code server (and with it the run worker it started) lives as
    long as the workspace, so the wait is inside it; the launch is timed once it is up, as
    under `dagster dev`."""
    from dagster_graphql.test.utils import execute_dagster_graphql

    from resources.dagster_private import WorkspaceFileTarget, WorkspaceProcessContext

    params = {"selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY,
                           "jobName": job},
              "runConfigData": {},
              "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}
    target = WorkspaceFileTarget(paths=[str(REPO / "workspace.yaml")])
    with WorkspaceProcessContext(instance, target) as workspace:
        clicked = time.time()
        result = execute_dagster_graphql(workspace.create_request_context(), LAUNCH,
                                         variables={"params": params})
        if result.errors:
            raise RuntimeError(f"launchRun failed: {result.errors}")
        launched = result.data["launchRun"]
        if launched["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launchRun did not launch: {launched}")
        run_id = launched["run"]["runId"]
        wait_for_run(instance, run_id, timeout_s)
    return run_id, clicked


def run_seconds(instance: dg.DagsterInstance, run_id: str, clicked: float) -> tuple[float, float]:
    """(the run's duration as the UI shows it, seconds from the launch to the run's end)."""
    record = instance.get_run_record_by_id(run_id)
    if record is None or not record.start_time or not record.end_time:
        raise RuntimeError(f"run {run_id} has no start or end time")
    return record.end_time - record.start_time, record.end_time - clicked
