"""Benchmark: `joins.lake.write_delta` against Spark's plain `DataFrame.write.parquet`.

Both write the same generated rows (id long, amount double, name string, event_date date as
the partition column) with the same partitioning, in the same run, alternating. Reported per
row count: seconds (best of --repeat), rows/s, the ratio write_delta / parquet throughput (goal
>= 0.7) and the driver's Python-process memory: the tracemalloc peak during the write and the
process's peak RSS. The driver only lists files, reads footers and commits, so its memory must
not grow with the row count: a 1M-row baseline is always measured for comparison.

    .venv/bin/python -m bench.delta_write --rows 10000000

Results go to bench/results/delta_write.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import tempfile
import time
import tracemalloc
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

GOAL_RATIO = 0.7
BASELINE_ROWS = 1_000_000
RESULTS = Path(__file__).parent / "results" / "delta_write.json"


@dataclass(frozen=True)
class Measurement:
    rows: int
    parquet_seconds: float
    delta_seconds: float
    parquet_rows_per_s: float
    delta_rows_per_s: float
    ratio: float
    delta_files: int
    delta_tracemalloc_peak_mib: float
    maxrss_mib: float


def generate(spark: SparkSession, rows: int, days: int) -> DataFrame:
    """Rows computed in the executors (nothing comes from the driver)."""
    from pyspark.sql import functions as F

    return spark.range(rows).select(
        F.col("id"),
        (F.col("id") * 0.37 % 1000).alias("amount"),
        F.concat(F.lit("customer-"), (F.col("id") % 100_003).cast("string")).alias("name"),
        F.date_add(F.lit(dt.date(2024, 1, 1)), (F.col("id") % days).cast("int")).alias("event_date"),
    )


def _maxrss_mib() -> float:
    # ru_maxrss is in KiB on Linux: the peak of this (Python) process, not of the JVM.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(action: Callable[[], object]) -> tuple[float, object, float]:
    tracemalloc.reset_peak()
    start = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - start
    return seconds, result, tracemalloc.get_traced_memory()[1] / 2**20


def measure(spark: SparkSession, rows: int, days: int, repeat: int, scratch: Path) -> Measurement:
    from joins.lake import write_delta

    best_parquet = best_delta = float("inf")
    files = 0
    peak = 0.0
    for attempt in range(repeat):
        plain = scratch / f"parquet-{rows}-{attempt}"
        seconds, _, _ = _timed(lambda p=plain: generate(spark, rows, days).write
                               .partitionBy("event_date").parquet(str(p)))
        best_parquet = min(best_parquet, seconds)
        shutil.rmtree(plain, ignore_errors=True)

        table = scratch / f"delta-{rows}-{attempt}"
        seconds, info, traced = _timed(lambda t=table: write_delta(
            generate(spark, rows, days), str(t), partition_by=["event_date"]))
        if info.rows != rows:  # type: ignore[attr-defined]
            raise SystemExit(f"write_delta committed {info.rows} rows, expected {rows}")  # type: ignore[attr-defined]
        best_delta = min(best_delta, seconds)
        files = info.files  # type: ignore[attr-defined]
        peak = max(peak, traced)
        shutil.rmtree(table, ignore_errors=True)
    return Measurement(
        rows=rows, parquet_seconds=round(best_parquet, 3), delta_seconds=round(best_delta, 3),
        parquet_rows_per_s=round(rows / best_parquet), delta_rows_per_s=round(rows / best_delta),
        ratio=round(best_parquet / best_delta, 3), delta_files=files,
        delta_tracemalloc_peak_mib=round(peak, 2), maxrss_mib=round(_maxrss_mib(), 1))


def render(results: list[Measurement]) -> str:
    header = (f"{'rows':>12} {'parquet s':>10} {'delta s':>9} {'parquet rows/s':>15} "
              f"{'delta rows/s':>13} {'ratio':>6} {'files':>6} {'py peak MiB':>12} "
              f"{'maxrss MiB':>11}")
    lines = [header, "-" * len(header)]
    for m in results:
        lines.append(f"{m.rows:>12,} {m.parquet_seconds:>10.2f} {m.delta_seconds:>9.2f} "
                     f"{m.parquet_rows_per_s:>15,} {m.delta_rows_per_s:>13,} {m.ratio:>6.2f} "
                     f"{m.delta_files:>6} {m.delta_tracemalloc_peak_mib:>12.2f} "
                     f"{m.maxrss_mib:>11.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[BASELINE_ROWS, 10_000_000],
                        help="row counts to measure (a 1M baseline is added for the memory check)")
    parser.add_argument("--days", type=int, default=10, help="distinct event_date partitions")
    parser.add_argument("--repeat", type=int, default=2, help="runs per method; the best counts")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sizes = sorted(set(args.rows) | ({BASELINE_ROWS} if max(args.rows) > BASELINE_ROWS else set()))

    from joins.spark import get_spark

    spark = get_spark()
    tracemalloc.start()
    scratch = Path(tempfile.mkdtemp(prefix="bench-delta-write-"))
    try:
        measure(spark, 50_000, args.days, 1, scratch)  # warm-up: JIT, first-job costs
        results = [measure(spark, n, args.days, args.repeat, scratch) for n in sizes]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(render(results))
    smallest, largest = results[0], results[-1]
    growth = round(largest.delta_tracemalloc_peak_mib - smallest.delta_tracemalloc_peak_mib, 2)
    worst = min(m.ratio for m in results)
    print(f"\nthroughput ratio (write_delta / parquet): worst {worst:.2f}, goal >= {GOAL_RATIO}"
          f" -> {'met' if worst >= GOAL_RATIO else 'NOT met'}")
    print(f"driver memory growth {smallest.rows:,} -> {largest.rows:,} rows: "
          f"{growth:+.2f} MiB traced Python peak")
    report = {
        "benchmark": "delta_write",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "spark": spark.version},
        "days": args.days, "repeat": args.repeat, "goal_ratio": GOAL_RATIO,
        "worst_ratio": worst, "goal_met": worst >= GOAL_RATIO,
        "driver_traced_peak_growth_mib": growth,
        "results": [asdict(m) for m in results],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
