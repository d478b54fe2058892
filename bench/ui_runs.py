"""What a run launched from the Dagster UI costs a user, by where it runs, against the same job
run in-process.

    .venv/bin/python -m bench.ui_runs --runs 3 --warmup 2

The job is the demo pipeline's two-day backfill (the join's batch form over 2024-03-01 and
2024-03-02 and its asset checks) on a sample lake (`runplatform.warm_up.sample_lake`), built
once under a temporary folder. Each way of running is launched the way the UI's button launches
it (`runplatform.ui_launch`: the `launchRun` GraphQL mutation against `workspace.yaml`'s code
location, through the instance's run launcher):

- `warm_worker`: the warm run worker `./tj dev` starts (`runplatform.run_worker`, its own
  classic SparkSession warmed on a sample first): no process start per run.
- `process_per_run`: Dagster's default launcher, a run worker process per run, attached to a
  warm local Spark Connect server (what `./tj dev` starts with `TJ_RUN_WORKER=0`).
- `jvm_per_run`: the default launcher with no server: every run starts a Spark driver.
- `in_process`: the job's `execute_in_process` in this process, on its warm session: the
  least a run can cost, and the reference of the ratios.

Every way is warmed alike: `--warmup` untimed runs after its own warm-up, then `--runs` timed
ones. Per way the medians (min-max) of the run's duration (what the UI shows) and of the time
from the launch to the run's end (what a user waits for), each ÷ the in-process run, are printed
and saved to bench/results/ui_runs.json (or --out). Every run must succeed and materialize both
days, or the benchmark stops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import dagster as dg

RESULTS = Path(__file__).resolve().parent / "results" / "ui_runs.json"
WAYS = ("in_process", "warm_worker", "process_per_run", "jvm_per_run")


def _materialized_days(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return sorted(str(e.dagster_event.partition) for e in instance.all_logs(run_id)
                  if e.dagster_event and e.dagster_event.event_type_value == "ASSET_MATERIALIZATION")


def _checked(instance: dg.DagsterInstance, run_id: str) -> None:
    run = instance.get_run_by_id(run_id)
    if run is None or run.status != dg.DagsterRunStatus.SUCCESS:
        failures = [e.message for e in instance.all_logs(run_id)
                    if e.dagster_event and e.dagster_event.is_failure]
        raise RuntimeError(f"run {run_id} did not succeed: {failures or run}")
    days = _materialized_days(instance, run_id)
    if days != ["2024-03-01", "2024-03-02"]:
        raise RuntimeError(f"run {run_id} materialized {days}, not the two days")


@contextmanager
def _instance(home: Path, launcher: str) -> Iterator[dg.DagsterInstance]:
    from runplatform.ui_launch import write_instance_config

    write_instance_config(home, launcher=launcher)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        yield instance
    finally:
        instance.dispose()


def _timed(launch: Callable[[], tuple[float, float]], runs: int,
           warmup: int) -> dict[str, list[float]]:
    for _ in range(warmup):
        launch()
    out: dict[str, list[float]] = {"run_s": [], "launch_to_end_s": []}
    for _ in range(runs):
        run_s, end_s = launch()
        out["run_s"].append(run_s)
        out["launch_to_end_s"].append(end_s)
    return out


def _launched(home: Path, launcher: str, job: str, days: dict[str, str], runs: int,
              warmup: int) -> dict[str, list[float]]:
    from runplatform.ui_launch import launch_like_the_ui, run_seconds

    with _instance(home, launcher) as instance:
        def launch() -> tuple[float, float]:
            run_id, clicked = launch_like_the_ui(instance, job, days)
            _checked(instance, run_id)
            return run_seconds(instance, run_id, clicked)

        return _timed(launch, runs, warmup)


def measure(ways: list[str], runs: int, warmup: int, base: Path) -> dict[str, dict[str, Any]]:
    from assets.factory import build_pipeline_assets
    from pipelines.definitions import DEMO_SPEC, spark_resource_from_env
    from pipelines.factory import backfill_job_name
    from runplatform.dev import run_worker, warm_spark
    from runplatform.ui_launch import WARM_WORKER_LAUNCHER, demo_instance, wait_for_warm_worker
    from runplatform.warm_up import DAYS, backfill_days, sample_lake

    root, home, env = demo_instance(base)
    os.environ.update(env)
    os.environ.pop("TJ_SPARK_REMOTE", None)
    job = backfill_job_name(build_pipeline_assets(DEMO_SPEC).spec)
    results: dict[str, dict[str, Any]] = {}
    spark = spark_resource_from_env()
    print("== the sample lake", file=sys.stderr, flush=True)
    with _instance(home, "") as instance:
        sample_lake(root, instance, spark)

        def in_process() -> tuple[float, float]:
            started = time.monotonic()
            result = backfill_days(root, instance, spark, DAYS)
            wall = time.monotonic() - started
            _checked(instance, result.run_id)
            record = instance.get_run_record_by_id(result.run_id)
            assert record is not None and record.start_time and record.end_time
            return record.end_time - record.start_time, wall

        if "in_process" in ways:
            print("== in_process", file=sys.stderr, flush=True)
            results["in_process"] = _timed(in_process, runs, warmup)
    if "warm_worker" in ways:
        print("== warm_worker (its own warm-up first)", file=sys.stderr, flush=True)
        with run_worker(home) as proc:
            assert proc is not None, "TJ_RUN_WORKER=0 is set: no worker to measure"
            wait_for_warm_worker(home, proc, home / "run-worker.log")
            results["warm_worker"] = _launched(home, WARM_WORKER_LAUNCHER, job, DAYS, runs, warmup)
    if "process_per_run" in ways:
        print("== process_per_run (the server's warm-up first)", file=sys.stderr, flush=True)
        with warm_spark(base / "spark-connect") as warm:
            if not warm.env:
                raise RuntimeError("no local Spark Connect server: TJ_SPARK_REMOTE, "
                                   "TJ_SPARK_MASTER or TJ_WARM_SPARK=0 is set")
            warm.wait_warm()
            with patch.dict(os.environ, warm.env):
                results["process_per_run"] = _launched(home, "", job, DAYS, runs, warmup)
    if "jvm_per_run" in ways:
        print("== jvm_per_run", file=sys.stderr, flush=True)
        results["jvm_per_run"] = _launched(home, "", job, DAYS, runs, warmup)
    return results


def _dagster_children() -> list[int]:
    """This process's child processes that run Dagster (the code servers the launches started)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"dagster" in cmdline:
            pids.append(int(stat.parent.name))
    return pids


def wait_for_code_servers(timeout_s: float = 60) -> None:
    """A code server a launch started stops after its workspace closes, on its own time, and
    writes to the Dagster home as it stops: wait for it before the home is removed."""
    deadline = time.monotonic() + timeout_s
    while _dagster_children() and time.monotonic() < deadline:
        time.sleep(0.5)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} s ({min(values):.1f}–{max(values):.1f})"


def table(results: dict[str, dict[str, Any]]) -> str:
    ref = results.get("in_process")
    ref_s = statistics.median(ref["launch_to_end_s"]) if ref else None
    lines = ["| way | run (the UI's duration) | launch → end | ÷ in-process |",
             "|---|---|---|---|"]
    for way in WAYS:
        if way not in results:
            continue
        r = results[way]
        ratio = "" if ref_s is None else f"{statistics.median(r['launch_to_end_s']) / ref_s:.2f}×"
        lines.append(f"| {way} | {_median(r['run_s'])} | {_median(r['launch_to_end_s'])} | "
                     f"{ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ui_runs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ways", default=",".join(WAYS),
                        help=f"comma-separated, of {', '.join(WAYS)}")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per way")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs per way first")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")   # Dagster's beta notes: not the benchmark's output
    ways = [w for w in args.ways.split(",") if w]
    unknown = sorted(set(ways) - set(WAYS))
    if unknown:
        parser.error(f"unknown ways {unknown}; choose from {', '.join(WAYS)}")
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be at least 1 and --warmup at least 0")
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tj-bench-ui-") as tmp:
        results = measure(ways, args.runs, args.warmup, Path(tmp))
        wait_for_code_servers()
    load_end = os.getloadavg()
    print(table(results))
    print(f"load average {load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": "python -m bench.ui_runs " + " ".join(argv if argv is not None else sys.argv[1:]),
        "results": results, "load_average": {"start": load_start, "end": load_end}},
        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
