"""Where a batch join's wall time goes: Spark jobs and their stages against the driver's time.

    .venv/bin/python -m bench.profile_jobs --join asof --size 1m:100k --dist uniform --how left
    .venv/bin/python -m bench.profile_jobs --join interval --size 1m --dist skewed --how inner

`--join asof_held`: the as-of join through the version index held between calls (what a
micro-batch uses), so that the index job is not paid per query.

The join is the benchmark's own (`bench.asof_join` / `bench.interval_join`, the project's join
on the same data, written to the `noop` sink), warmed as the benchmark warms it, then timed
`--runs` times, each run in a Spark job group. Spark's monitoring REST API (the UI is on for
this command only, at 127.0.0.1) then gives every job and stage of each run: when it was
submitted and completed, its tasks, the tasks' summed run time and when its first task started.
Printed per run: the wall time, the time some job was running (the union of the jobs'
intervals) and the rest, which is the driver alone (planning, Catalyst's analysis, py4j calls,
broadcasts it builds); then, for the median run, every stage; then DuckDB's plan of the
benchmark on the same data, timed alike, for the ratio.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

UI_PORT = 4077


@dataclass(frozen=True)
class Stage:
    stage_id: int
    name: str
    tasks: int
    submitted_s: float      # after the run's start
    wait_s: float           # submission -> first task
    duration_s: float       # submission -> completion
    task_time_s: float      # the tasks' run time, summed
    task_max_s: float       # the longest task's run time


@dataclass(frozen=True)
class RunProfile:
    wall_s: float
    jobs: int
    in_jobs_s: float         # the union of the jobs' [submission, completion]
    stages: tuple[Stage, ...]

    @property
    def driver_only_s(self) -> float:
        return self.wall_s - self.in_jobs_s


def _get(spark: SparkSession, path: str) -> Any:
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"http://127.0.0.1:{UI_PORT}/api/v1/applications/{app}/{path}",
                                timeout=30) as response:
        return json.load(response)


def _ms(stamp: str) -> float:
    # "2026-11-30T01:02:03.456GMT"
    return dt.datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def profile_run(spark: SparkSession, build: Callable[[], DataFrame], group: str) -> RunProfile:
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    start = time.time()
    build().write.format("noop").mode("overwrite").save()
    wall = time.time() - start
    sc.setJobGroup("", "")
    time.sleep(1.0)   # the UI's listener is asynchronous
    jobs = [j for j in _get(spark, "jobs") if j.get("jobGroup") == group]
    intervals = [(_ms(j["submissionTime"]), _ms(j["completionTime"])) for j in jobs
                 if "completionTime" in j]
    stage_ids = sorted({s for j in jobs for s in j["stageIds"]})
    stages = []
    for sid in stage_ids:
        for attempt in _get(spark, f"stages/{sid}"):
            if attempt.get("status") != "COMPLETE":
                continue   # skipped stages (their output reused) ran nothing
            quantiles = _get(spark, f"stages/{sid}/{attempt['attemptId']}/taskSummary"
                                    "?quantiles=1.0")["executorRunTime"]
            submitted = _ms(attempt["submissionTime"])
            first = _ms(attempt.get("firstTaskLaunchedTime", attempt["submissionTime"]))
            stages.append(Stage(sid, attempt["name"].split(" at ")[0][:40], attempt["numTasks"],
                                submitted - start, first - submitted,
                                _ms(attempt["completionTime"]) - submitted,
                                attempt["executorRunTime"] / 1000, quantiles[0] / 1000))
    return RunProfile(wall, len(jobs), _union(intervals), tuple(sorted(stages, key=lambda s: s.submitted_s)))


def _held_asof(spark: SparkSession, ds: Any, how: str) -> Callable[[], DataFrame]:
    """The as-of join through an index held between calls (`joins.asof.held_asof_join`, what a
    micro-batch uses): every call after the first finds the table's version held and runs no
    job for it."""
    from bench.asof_join import read_sides
    from joins.asof import HeldTable, held_asof_join

    events, versions = read_sides(spark, ds)
    held = HeldTable(holder="profile", table_id=str(ds.versions_path), version=0,
                     rows=versions.count(), schema=versions.schema, history=lambda: versions,
                     changes_after=lambda _v: None, sequence=())

    def build() -> DataFrame:
        joined = held_asof_join(events, held, stream_key="key", stream_ts="ts", table_key="key",
                                table_ts="ts", how=how)  # type: ignore[arg-type]
        if joined is None:
            raise SystemExit("the held index does not apply to this data")
        return joined.joined

    return build


def _duckdb(join: str, size: str, dist: str, how: str) -> Callable[[], Any]:
    """The benchmark's reference plan of DuckDB on the same data (ASOF JOIN; the binned
    interval join), timed in the same process for the ratio."""
    if join.startswith("asof"):
        from bench.asof_join import duckdb_run
        from bench.datagen import data_set, generate, parse_size

        events, versions = parse_size(size)
        ds = generate(data_set(events, versions, dist))
        return lambda: duckdb_run(ds, how, False)
    from bench.interval_join import duckdb_run as interval_duckdb
    from bench.interval_join import generate as interval_data

    root = interval_data({"100k": 100_000, "1m": 1_000_000}[size], dist, 30)
    return lambda: interval_duckdb(str(root), True, how, check=False)


def _builder(spark: SparkSession, join: str, size: str, dist: str, how: str) -> Callable[[], DataFrame]:
    if join in ("asof", "asof_held"):
        from bench.asof_join import spark_asof
        from bench.datagen import data_set, generate, parse_size

        events, versions = parse_size(size)
        ds = generate(data_set(events, versions, dist))
        if join == "asof_held":
            return _held_asof(spark, ds, how)
        return lambda: spark_asof(spark, ds, how, "auto")
    from bench.interval_join import generate as interval_data
    from bench.interval_join import ours

    rows = {"100k": 100_000, "1m": 1_000_000}[size]
    root = interval_data(rows, dist, 30)
    return lambda: ours(spark, root, how)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Spark jobs and stages of a join (see docstring).")
    parser.add_argument("--join", choices=("asof", "asof_held", "interval"), required=True)
    parser.add_argument("--size", default="1m:100k", help="asof: EVENTS:VERSIONS; interval: 100k|1m")
    parser.add_argument("--dist", default="uniform")
    parser.add_argument("--how", default="left")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)

    from joins.spark import SparkSettings, get_spark

    spark = get_spark(SparkSettings(shuffle_partitions=8, driver_memory="8g",
                                    extra_conf={"spark.ui.enabled": "true",
                                                "spark.ui.port": str(UI_PORT),
                                                "spark.ui.retainedJobs": "10000",
                                                "spark.ui.retainedStages": "10000"}))
    build = _builder(spark, args.join, args.size, args.dist, args.how)
    for _ in range(args.warmup):
        build().write.format("noop").mode("overwrite").save()
    runs = [profile_run(spark, build, f"profile-{n}") for n in range(args.runs)]
    print(f"{args.join} {args.size} {args.dist} {args.how}: {args.runs} runs after {args.warmup} "
          f"warm-up runs")
    print("run  wall     in jobs  driver only  jobs")
    for n, r in enumerate(runs):
        print(f"{n:>3}  {r.wall_s:6.3f}s  {r.in_jobs_s:6.3f}s  {r.driver_only_s:8.3f}s  {r.jobs:>4}")
    median = sorted(runs, key=lambda r: r.wall_s)[len(runs) // 2]
    print(f"\nthe median run's stages (wall {median.wall_s:.3f} s):")
    print("  at      stage  tasks  wait    duration  task time: summed, longest  name")
    for s in median.stages:
        print(f"  {s.submitted_s:6.3f}s {s.stage_id:>5}  {s.tasks:>5}  {s.wait_s:5.3f}s  "
              f"{s.duration_s:6.3f}s   {s.task_time_s:7.3f}s  {s.task_max_s:7.3f}s        {s.name}")
    walls = [r.wall_s for r in runs]
    print(f"\nwall: median {statistics.median(walls):.3f} s (min {min(walls):.3f}, max {max(walls):.3f})")
    duck = _duckdb(args.join, args.size, args.dist, args.how)
    for _ in range(args.warmup):
        duck()
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        duck()
        times.append(time.perf_counter() - start)
    print(f"DuckDB's plan on the same data: median {statistics.median(times):.3f} s (min "
          f"{min(times):.3f}, max {max(times):.3f}); ours ÷ it "
          f"{statistics.median(walls) / statistics.median(times):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
