"""Benchmark: the project's Delta writer (`joins.lake.write_delta`: a delta-spark transaction
held in the JVM, `temporaljoins.DeltaTxn`, with the runtime's checks and its app transaction)
against delta-spark's `DataFrame.write.format("delta")` and Spark's plain
`DataFrame.write.parquet` (no table at all).

Two questions, one run:

- **Throughput**: one write of `--rows` generated rows (id long, amount double, name string,
  event_date date as the partition column) into a new table, median (and best) of `--repeat`,
  the methods' order turning each run. Also the driver's Python memory (tracemalloc peak, peak
  RSS): the driver only lists files and commits, so it must not grow with the row count.
- **Latency** of what a micro-batch does: `--appends` successive appends of `--small` rows into
  one table that already holds `--history` commits, median and min-max per method, with and
  without an app transaction (the idempotent write every runtime commit is). The first append
  of each table is reported apart (cold: the writer reads the table's log for the first time).
  (The project's earlier writer, Parquet staged by Spark and committed by delta-rs, was measured
  against this one before it was removed: bench/README.md.)

    .venv/bin/python -m bench.delta_write --rows 1m,10m --small 100,10k --appends 10 --history 50

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
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GOAL_RATIO = 0.7
RESULTS = Path(__file__).parent / "results" / "delta_write.json"
METHODS = ("parquet", "ours", "delta-spark")
# "+txn": with an app transaction (the idempotent write every runtime commit is); "+replace":
# an overwrite of one event day (a backfill's partition replacement, a state table's rewrite).
APPEND_METHODS = ("ours", "ours+txn", "ours+replace", "delta-spark", "delta-spark+txn",
                  "delta-spark+replace")
FIRST_DAY = dt.date(2024, 1, 1)


@dataclass(frozen=True)
class Throughput:
    rows: int
    seconds: dict[str, float]          # method -> median seconds
    best_s: dict[str, float]           # method -> best seconds
    rows_per_s: dict[str, int]
    files: dict[str, int]
    ours_tracemalloc_peak_mib: float
    maxrss_mib: float


@dataclass(frozen=True)
class Latency:
    rows: int
    history: int
    cold_s: dict[str, float]           # method -> the first append of a fresh writer
    median_s: dict[str, float]
    min_s: dict[str, float]
    max_s: dict[str, float]


def generate(spark: SparkSession, rows: int, days: int, offset: int = 0) -> DataFrame:
    """Rows computed in the executors (nothing comes from the driver)."""
    from pyspark.sql import functions as F

    return spark.range(offset, offset + rows).select(
        F.col("id"),
        (F.col("id") * 0.37 % 1000).alias("amount"),
        F.concat(F.lit("customer-"), (F.col("id") % 100_003).cast("string")).alias("name"),
        F.date_add(F.lit(dt.date(2024, 1, 1)), (F.col("id") % days).cast("int")).alias("event_date"),
    )


def _maxrss_mib() -> float:
    # ru_maxrss is in KiB on Linux: the peak of this (Python) process, not of the JVM.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(action: Callable[[], object]) -> tuple[float, float]:
    tracemalloc.reset_peak()
    start = time.perf_counter()
    action()
    return time.perf_counter() - start, tracemalloc.get_traced_memory()[1] / 2**20


def write(method: str, df: DataFrame, path: str, txn: tuple[str, int] | None = None,
          replace: bool = False) -> None:
    """One write by `method`: an append (a new table on the first), or with `replace` an
    overwrite of the first event day (every row of `df` must fall in it)."""
    from joins import lake

    if method == "parquet":
        df.write.mode("append").partitionBy("event_date").parquet(path)
    elif method == "ours":
        info = lake.write_delta(df, path, partition_by=["event_date"],
                                mode="overwrite" if replace else "append",
                                replace_partitions={"event_date": [FIRST_DAY]} if replace else None,
                                app_txn=lake.AppTxn(*txn) if txn else None)
        if info.version is None:
            raise SystemExit(f"write_delta committed nothing to {path}")
    else:
        writer = df.write.format("delta").partitionBy("event_date")
        if replace:
            writer = writer.mode("overwrite").option("replaceWhere",
                                                     f"event_date = DATE'{FIRST_DAY}'")
        else:
            writer = writer.mode("append")
        if txn is not None:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
        writer.save(path)


def count_files(path: Path) -> int:
    return sum(1 for p in path.rglob("*.parquet") if "_staging" not in p.parts)


def throughput(spark: SparkSession, rows: int, days: int, repeat: int,
               scratch: Path) -> Throughput:
    from joins.lake import read_delta

    times: dict[str, list[float]] = {m: [] for m in METHODS}
    files: dict[str, int] = {}
    peak = 0.0
    for attempt in range(repeat):
        # The order turns every run: whichever method follows another's write of millions of
        # rows pays for its garbage and its files' page cache (a fixed order made ours look
        # 1.17-1.42x delta-spark's time; alternating, the two took the same).
        for method in METHODS if attempt % 2 == 0 else METHODS[::-1]:
            target = scratch / f"{method}-{rows}-{attempt}"
            seconds, traced = _timed(lambda m=method, t=target: write(
                m, generate(spark, rows, days), str(t)))
            times[method].append(seconds)
            files[method] = count_files(target)
            if method != "parquet":
                got = read_delta(spark, str(target)).count()
                if got != rows:
                    raise SystemExit(f"{method} wrote {got} rows, expected {rows}")
            if method == "ours":
                peak = max(peak, traced)
            shutil.rmtree(target, ignore_errors=True)
    median = {m: statistics.median(t) for m, t in times.items()}
    return Throughput(rows=rows, seconds={m: round(s, 3) for m, s in median.items()},
                      best_s={m: round(min(t), 3) for m, t in times.items()},
                      rows_per_s={m: round(rows / s) for m, s in median.items()}, files=files,
                      ours_tracemalloc_peak_mib=round(peak, 2), maxrss_mib=round(_maxrss_mib(), 1))


def latency(spark: SparkSession, rows: int, history: int, appends: int, days: int,
            scratch: Path) -> Latency:
    """`appends` appends of `rows` rows per method, each method on its own table that already
    holds `history` commits (written by delta-spark, so no method finds the log in its cache
    from having written it)."""
    tables = {m: scratch / f"append-{m}-{rows}" for m in APPEND_METHODS}
    base = scratch / f"history-{rows}"
    for i in range(history):
        generate(spark, 10, days, offset=i * 10).write.format("delta").mode("append") \
            .partitionBy("event_date").save(str(base))
    for table in tables.values():
        shutil.copytree(base, table)
    times: dict[str, list[float]] = {m: [] for m in APPEND_METHODS}
    for i in range(appends + 1):          # the methods take turns, batch by batch
        for method, table in tables.items():
            replace = method.endswith("+replace")
            # A replacement's rows all fall in the first day (days=1).
            frame = generate(spark, rows, 1 if replace else days, offset=(history + i) * rows)
            txn = (f"bench.{method}", i) if method.endswith("+txn") else None
            seconds, _ = _timed(lambda m=method, f=frame, t=table, x=txn, r=replace:
                                write(m.split("+")[0], f, str(t), x, r))
            times[method].append(seconds)
    for method, table in tables.items():
        from joins.lake import read_delta

        got = read_delta(spark, str(table)).count()
        want = history * 10 + (appends + 1) * rows
        if method.endswith("+replace"):   # the first day holds the last replacement's rows
            first_day = sum(1 for j in range(history * 10) if j % days == 0)
            want = history * 10 - first_day + rows
        if got != want:
            raise SystemExit(f"{method}: {got} rows after the appends, expected {want}")
    steady = {m: t[1:] for m, t in times.items()}
    return Latency(rows=rows, history=history,
                   cold_s={m: round(t[0], 3) for m, t in times.items()},
                   median_s={m: round(statistics.median(t), 3) for m, t in steady.items()},
                   min_s={m: round(min(t), 3) for m, t in steady.items()},
                   max_s={m: round(max(t), 3) for m, t in steady.items()})


def render(big: list[Throughput], small: list[Latency]) -> str:
    lines = ["throughput: one write into a new table (median of the runs, the order turning; "
             "best in brackets)",
             f"{'rows':>12} " + " ".join(f"{m + ' s':>14}" for m in METHODS)
             # Every ratio is of times: above 1, the first is slower.
             + f" {'ours÷parquet':>13} {'delta-spark÷parquet':>20} {'ours÷delta-spark':>17}"]
    for t in big:
        s = t.seconds
        lines.append(f"{t.rows:>12,} " + " ".join(f"{f'{s[m]:.2f} ({t.best_s[m]:.2f})':>14}"
                                                  for m in METHODS)
                     + f" {s['ours'] / s['parquet']:>13.2f}"
                     f" {s['delta-spark'] / s['parquet']:>20.2f}"
                     f" {s['ours'] / s['delta-spark']:>17.2f}")
    lines += ["", "latency: appends to a table with history; median (min-max) after the cold "
              "first append"]
    for lat in small:
        lines.append(f"{lat.rows:,} rows per append, {lat.history} commits of history")
        for m in APPEND_METHODS:
            lines.append(f"  {m:<20} {lat.median_s[m]:6.3f} s ({lat.min_s[m]:.3f}-"
                         f"{lat.max_s[m]:.3f})   cold {lat.cold_s[m]:.3f} s")
    return "\n".join(lines)


def _sizes(text: str) -> list[int]:
    return [int(float(x.lower().replace("k", "e3").replace("m", "e6")))
            for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=_sizes, default=[1_000_000, 10_000_000],
                        help="row counts of the throughput writes (e.g. 1m,10m; empty: none)")
    parser.add_argument("--small", type=_sizes, default=[100, 10_000],
                        help="rows per append of the latency runs (empty: none)")
    parser.add_argument("--appends", type=int, default=15, help="timed appends per method")
    parser.add_argument("--history", type=int, default=50,
                        help="commits the appended-to tables hold before the first append")
    parser.add_argument("--days", type=int, default=10, help="distinct event_date partitions")
    parser.add_argument("--repeat", type=int, default=6,
                        help="throughput runs, the methods' order turning; the median counts")
    parser.add_argument("--out", "--results", dest="out", type=Path, default=RESULTS,
                        help="where to save the results (--results: the old name)")
    args = parser.parse_args(argv)

    from joins.spark import get_spark

    spark = get_spark()
    tracemalloc.start()
    load_start = os.getloadavg()[0]
    scratch = Path(tempfile.mkdtemp(prefix="bench-delta-write-"))
    try:
        throughput(spark, 50_000, args.days, 1, scratch)  # warm-up: JIT, first-job costs
        latency(spark, 10, 3, 3, args.days, scratch / "warm")
        big = [throughput(spark, n, args.days, args.repeat, scratch) for n in args.rows]
        small = [latency(spark, n, args.history, args.appends, args.days, scratch)
                 for n in args.small]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_end = os.getloadavg()[0]
    print(render(big, small))
    print(f"\nload average {load_start:.1f} at the start, {load_end:.1f} at the end, "
          f"{os.cpu_count()} cpus")
    report = {
        "benchmark": "delta_write",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "spark": spark.version, "load_start": load_start, "load_end": load_end},
        "days": args.days, "repeat": args.repeat, "appends": args.appends,
        "history": args.history, "goal_ratio": GOAL_RATIO,
        "throughput": [asdict(t) for t in big], "latency": [asdict(lat) for lat in small],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
