"""What the batch join benchmarks share: one result record, one warm-up and timing protocol for
every engine, Spark actions that can be cancelled, DuckDB runs in a child process that can be
ended, and the cross-check of results by content (bench/checksum.py).

The protocol, the same for every engine so that none is timed colder than another: one untimed
run that computes the result's (row count, checksum), then `warmup` untimed runs of the timed
form, then `runs` timed runs. Each run is bounded by `timeout`; an engine that exceeds it on any
run is reported as a timeout and not timed further.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.checksum import spark_checksum

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class Result:
    size: str
    dist: str
    engine: str
    how: str = "inner"
    status: str = "ok"  # ok | timeout | skipped | error
    times_s: list[float] = field(default_factory=list)
    rows: int | None = None
    checksum: int | None = None
    note: str = ""
    median_s: float | None = None
    ratio_to_duckdb: float | None = None
    floor: bool = False  # reads the inputs and joins nothing: no result to compare

    def finish(self) -> None:
        if self.times_s:
            self.median_s = statistics.median(self.times_s)


class Timeout(Exception):
    pass


def timed(fn: Callable[[], Any], runs: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {"cpus": os.cpu_count(), "loadavg_1_5_15": [round(x, 2) for x in load],
            "python": platform.python_version(), "platform": platform.platform()}


def spark_action(spark: SparkSession, action: Callable[[], Any], timeout: float) -> Any:
    """Run a Spark action in its own job group, cancelling it after `timeout` seconds."""
    from pyspark import InheritableThread

    group = f"bench-{time.monotonic_ns()}"
    error: list[BaseException] = []
    value: list[Any] = []

    def work() -> None:
        try:
            spark.sparkContext.setJobGroup(group, "benchmark run", interruptOnCancel=True)
            value.append(action())
        except BaseException as exc:  # reported to the caller
            error.append(exc)

    thread = InheritableThread(target=work, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        spark.sparkContext.cancelJobGroup(group)
        thread.join(60)
        raise Timeout(f"cancelled after {timeout:.0f} s")
    if error:
        raise error[0]
    return value[0]


def _noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def _spark_protocol(spark: SparkSession, first: Callable[[], Any], record: Callable[[Any], None],
                    run: Callable[[], None], *, first_stage: str, runs: int, warmup: int,
                    timeout: float, res: Result) -> None:
    """One untimed `first` (its value to `record`), then `warmup` and `runs` timed `run`s, each a
    cancellable Spark action; a timeout is reported with the stage it happened in."""
    stage = first_stage
    try:
        record(spark_action(spark, first, timeout))
        stage = "a warm-up or timed run"
        res.times_s = timed(lambda: spark_action(spark, run, timeout), runs, warmup)
    except Timeout as exc:
        res.status, res.note = "timeout", f"{exc} in {stage}"


def spark_engine(spark: SparkSession, build: Callable[[], DataFrame], ids: tuple[str, str], *,
                 runs: int, warmup: int, timeout: float, res: Result) -> None:
    """The protocol for a Spark plan: checksum over the `ids` columns, then the `noop` sink
    (every output column materialized, nothing written)."""

    def record(value: tuple[int, int]) -> None:
        res.rows, res.checksum = value

    _spark_protocol(spark, lambda: spark_checksum(build(), *ids), record, lambda: _noop(build()),
                    first_stage="the checksum run", runs=runs, warmup=warmup, timeout=timeout,
                    res=res)


def spark_read_floor(spark: SparkSession, sides: Callable[[], list[DataFrame]], *, runs: int,
                     warmup: int, timeout: float, res: Result) -> None:
    """What any Spark plan of a join pays before it joins anything: each input read in full
    and written to the `noop` sink, one job per side as the project's broadcast plans run, timed
    by the same protocol as a join. `rows` is the rows read; there is no checksum to compare."""
    res.floor = True

    def record(rows: int) -> None:
        res.rows = rows

    def read_all() -> None:
        for df in sides():
            _noop(df)

    _spark_protocol(spark, lambda: sum(df.count() for df in sides()), record, read_all,
                    first_stage="the count run", runs=runs, warmup=warmup, timeout=timeout, res=res)


def local_engine(run: Callable[[bool], Any], *, runs: int, warmup: int, res: Result) -> None:
    """The protocol for an in-process engine: `run(True)` returns (rows, checksum), `run(False)`
    is the timed form."""
    res.rows, res.checksum = run(True)
    res.times_s = timed(lambda: run(False), runs, warmup)


def _child(fn: Callable[..., Any], args: tuple[Any, ...], total: int, queue: Any) -> None:
    try:
        queue.put(fn(*args, check=True))
        for _ in range(total):
            start = time.perf_counter()
            fn(*args, check=False)
            queue.put(time.perf_counter() - start)
    except Exception as exc:  # the parent reports it rather than waiting for the timeout
        queue.put(f"{type(exc).__name__}: {str(exc)[:300]}")


def _get(queue: Any, timeout: float) -> Any:
    item = queue.get(timeout=timeout)
    if isinstance(item, str):
        raise RuntimeError(item)
    return item


def child_engine(fn: Callable[..., Any], args: tuple[Any, ...], *, runs: int, warmup: int,
                 timeout: float, res: Result) -> None:
    """The protocol in a child process, ended when a run exceeds `timeout` (a plain range join
    on a hot key may not finish for minutes, and a thread cannot be stopped). `fn(*args,
    check=...)` as for local_engine; it must be a module-level function (spawned child)."""
    import multiprocessing as mp
    import queue as queue_mod

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, warmup + runs, queue))
    proc.start()
    try:
        res.rows, res.checksum = _get(queue, timeout + 30)  # + the child's start
        times = [_get(queue, timeout) for _ in range(warmup + runs)]
        res.times_s = times[warmup:]
    except queue_mod.Empty:
        stage = "the checksum run" if res.rows is None else "a warm-up or timed run"
        res.status, res.note = "timeout", f"over {timeout:.0f} s in {stage}"
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()


def print_table(results: list[Result]) -> None:
    header = (f"{'size':<10} {'dist':<8} {'how':<6} {'engine':<19} {'median s':>9} {'min-max s':>13} "
              f"{'x DuckDB':>9} {'rows':>10}  checksum / status")
    print(header)
    print("-" * len(header))
    for r in results:
        median = f"{r.median_s:.3f}" if r.median_s is not None else "-"
        spread = f"{min(r.times_s):.2f}-{max(r.times_s):.2f}" if r.times_s else "-"
        ratio = f"{r.ratio_to_duckdb:.2f}" if r.ratio_to_duckdb is not None else "-"
        rows = str(r.rows) if r.rows is not None else "-"
        status = (("floor: reads its inputs, joins nothing" if r.floor else str(r.checksum))
                  if r.status == "ok" else f"{r.status} ({r.note})")
        print(f"{r.size:<10} {r.dist:<8} {r.how:<6} {r.engine:<19} {median:>9} {spread:>13} "
              f"{ratio:>9} {rows:>10}  {status}")


def check_content(results: list[Result]) -> list[str]:
    """Engines that finished the same case must agree on (rows, checksum)."""
    problems = []
    for case in sorted({(r.size, r.dist, r.how) for r in results}):
        found = {r.engine: (r.rows, r.checksum) for r in results
                 if (r.size, r.dist, r.how) == case and r.status == "ok" and not r.floor}
        if len(set(found.values())) > 1:
            problems.append(f"{' '.join(case)}: results differ (rows, checksum): {found}")
    return problems


def set_ratios(results: list[Result], reference: str) -> None:
    """ratio_to_duckdb: each median over `reference`'s median in the same case."""
    for res in results:
        base = next((r for r in results if (r.size, r.dist, r.how) == (res.size, res.dist, res.how)
                     and r.engine == reference and r.median_s), None)
        if base is not None and base.median_s and res.median_s:
            res.ratio_to_duckdb = res.median_s / base.median_s


def report(results: list[Result], *, reference: str, command: str, args: dict[str, Any], out: Path,
           machine_before: dict[str, Any], extra: dict[str, Any] | None = None,
           summary: Callable[[], None] | None = None) -> int:
    """The end of a batch benchmark: ratios to `reference`, the table and the load average
    printed (then `summary`, with the ratios set), the run saved to `out` as JSON, and any
    disagreement of the engines' contents printed. Returns the exit status (1 on a mismatch)."""
    set_ratios(results, reference)
    machine_after = machine()
    print()
    print_table(results)
    print(f"\nload average before {machine_before['loadavg_1_5_15']}, after "
          f"{machine_after['loadavg_1_5_15']}")
    if summary is not None:
        summary()
    problems = check_content(results)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": command, "machine_before": machine_before, "machine_after": machine_after,
        "args": {k: str(v) for k, v in args.items()}, **(extra or {}),
        "results": [asdict(r) for r in results], "content_problems": problems}, indent=2) + "\n")
    print(f"\nsaved {out}")
    for problem in problems:
        print(f"CONTENT MISMATCH: {problem}")
    return 1 if problems else 0
