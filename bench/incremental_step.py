"""Cost of one incremental stream-table join micro-batch against the size of the table history.

    .venv/bin/python -m bench.incremental_step --history 100000,10000000 --batch 10000 --runs 3

Issue 4's target: a 10k-event micro-batch on 10M rows of versioned-table history costs at most
1.3x what it costs on 100k rows. The step must touch only the batch's new rows, the buffer and
the history of the batch's keys, never scan-and-shuffle all history.

Per history size: a versioned Delta table (the `joins.operators.versioned_table` layout, 10
versions per key over 30 days of event time, partitioned by event day) is generated once under
bench/data/. Each run starts a fresh join (stream source + join root), runs one untimed warm-up
batch (the first batch of a join reads the table's whole changelog once, for its stream time),
then times `run_microbatch` on `--runs` batches of `--batch` new events each (keys drawn from
the table's keys, event times just after the history, slightly out of order, a grace period
covering the disorder) plus `--table-updates` new table versions landed before each batch.
The median per size and the ratio of the largest size to the smallest are printed and saved to
bench/results/incremental_step.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DATA = Path(__file__).resolve().parent / "data"
RESULTS = Path(__file__).resolve().parent / "results" / "incremental_step.json"
DAY_MS = 86_400_000
T0_MS = 1_700_000_000_000
SPAN_MS = 30 * DAY_MS
VERSIONS_PER_KEY = 10
GRACE_MS = 60_000
EVENT_STEP_MS = 50  # event time advances this much per event (10k events ~ 8 minutes)
TARGET_RATIO = 1.3


@dataclass
class SizeResult:
    history: int
    keys: int
    times_s: list[float] = field(default_factory=list)
    median_s: float | None = None
    rows_out: list[int] = field(default_factory=list)
    ratio_to_smallest: float | None = None


def _spec() -> Any:
    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

    return StreamTableJoinSpec.model_validate(
        {"join": "left", "table": {"versioned": True, "history_retention_ms": SPAN_MS},
         "grace_ms": GRACE_MS, "late": "join"})


def _layout(ids: DataFrame, key: Any, ts: Any, *, batch_id: int) -> DataFrame:
    """Rows in the versioned-table layout (joins.operators.versioned_table)."""
    from pyspark.sql import functions as F

    return ids.select(
        key.cast("long").alias("key"), (F.col("id") % 1000).cast("double").alias("rate"),
        ts.cast("long").alias("ts"), F.lit(False).alias("tombstone"),
        F.lit("bench").alias("source_id"), F.lit(batch_id).cast("long").alias("batch_id"),
        F.col("id").cast("long").alias("arrival"),
        F.to_date(F.timestamp_millis(ts.cast("long"))).alias("event_date"))


def _history_rows(spark: SparkSession, n: int, keys: int) -> DataFrame:
    """`n` versions, VERSIONS_PER_KEY per key spread over SPAN_MS; one row per (key, ts)."""
    from pyspark.sql import functions as F

    width = SPAN_MS // VERSIONS_PER_KEY
    slot = (F.col("id") / keys).cast("long")  # the version's index within its key
    ts = F.lit(T0_MS) + slot * width + (F.col("id") * 7919) % F.lit(width)
    return _layout(spark.range(n), F.col("id") % keys, ts, batch_id=0)


def _update_rows(spark: SparkSession, n: int, keys: int, *, first_id: int, batch_id: int,
                 t_min: int, t_span: int) -> DataFrame:
    """`n` new versions of random keys with ts in [t_min, t_min + t_span)."""
    from pyspark.sql import functions as F

    ids = spark.range(first_id, first_id + n)
    ts = F.lit(t_min) + (F.col("id") * 7919) % F.lit(t_span)
    return _layout(ids, (F.col("id") * 40503) % keys, ts, batch_id=batch_id)


def history_table(spark: SparkSession, history: int) -> Path:
    """The versioned table of `history` rows, generated once (a `_SUCCESS` marker says done)."""
    from joins.lake import write_delta

    path = DATA / f"incremental_history_{history}"
    if (path / "_SUCCESS").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    keys = max(history // VERSIONS_PER_KEY, 1)
    rows = _history_rows(spark, history, keys)
    write_delta(rows, str(path), mode="append", partition_by=["event_date"],
                commit_message=f"bench history of {history} versions")
    (path / "_SUCCESS").write_text("")
    return path


def _events(spark: SparkSession, n: int, keys: int, *, first_seq: int, t_start: int) -> DataFrame:
    from pyspark.sql import functions as F

    ids = spark.range(first_seq, first_seq + n)
    # Disorder well inside the grace period: each event up to 20 s early.
    ts = F.lit(t_start) + (F.col("id") - first_seq) * EVENT_STEP_MS - (F.col("id") * 104729) % 20_000
    return ids.select(
        ((F.col("id") * 2654435761) % keys).cast("long").alias("key"),
        (F.col("id") % 97).cast("double").alias("amount"),
        ts.cast("long").alias("ts"),
        F.to_date(F.timestamp_millis(ts.cast("long"))).alias("event_date"),
        F.col("id").cast("long").alias("_seq"))


def run_size(spark: SparkSession, history: int, *, batch: int, runs: int, table_updates: int,
             workdir: Path) -> SizeResult:
    from joins.lake import write_delta
    from joins.operators.stream_table_join.spark_incremental import JoinPaths, run_microbatch

    keys = max(history // VERSIONS_PER_KEY, 1)
    source = history_table(spark, history)
    run_dir = Path(tempfile.mkdtemp(prefix=f"step-{history}-", dir=workdir))
    table = run_dir / "table"
    shutil.copytree(source, table)  # each size's runs append table updates to their own copy
    stream = str(run_dir / "stream")
    paths = JoinPaths(str(run_dir / "join"))
    spec = _spec()
    result = SizeResult(history=history, keys=keys)
    t_next = T0_MS + SPAN_MS
    seq = 0
    next_arrival = history
    for n in range(runs + 1):
        if table_updates:
            write_delta(_update_rows(spark, table_updates, keys, first_id=next_arrival,
                                     batch_id=n + 1, t_min=t_next - GRACE_MS, t_span=GRACE_MS),
                        str(table), mode="append", partition_by=["event_date"])
            next_arrival += table_updates
        write_delta(_events(spark, batch, keys, first_seq=seq, t_start=t_next), stream,
                    mode="append", partition_by=["event_date"])
        seq += batch
        t_next += batch * EVENT_STEP_MS
        started = time.perf_counter()
        report = run_microbatch(spark, spec, paths, stream_source=stream, table_source=str(table))
        elapsed = time.perf_counter() - started
        if n == 0:
            continue  # warm-up: the first batch of a join reads the whole table changelog once
        result.times_s.append(round(elapsed, 3))
        result.rows_out.append(report.rows_out)
        print(f"history {history:>10,}  batch {n}: {elapsed:6.2f} s  rows out {report.rows_out:,}  "
              f"buffered {report.still_buffered:,}", flush=True)
    result.median_s = statistics.median(result.times_s)
    shutil.rmtree(run_dir, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.incremental_step", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", default="100000,10000000",
                        help="comma-separated history sizes (rows of the versioned table)")
    parser.add_argument("--batch", type=int, default=10_000, help="new events per micro-batch")
    parser.add_argument("--runs", type=int, default=3, help="timed micro-batches per size")
    parser.add_argument("--table-updates", type=int, default=100,
                        help="new table versions landed before each batch")
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.history.split(",") if s]

    from joins.spark import get_spark

    spark = get_spark()
    DATA.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="incremental-step-", dir=DATA))
    try:
        results = [run_size(spark, h, batch=args.batch, runs=args.runs,
                            table_updates=args.table_updates, workdir=workdir) for h in sizes]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    smallest = results[0].median_s
    print(f"\n{'history':>12} {'median s':>9} {'ratio':>6}  runs")
    for r in results:
        assert r.median_s is not None and smallest
        r.ratio_to_smallest = round(r.median_s / smallest, 3)
        print(f"{r.history:>12,} {r.median_s:>9.2f} {r.ratio_to_smallest:>6.2f}  {r.times_s}")
    ratio = results[-1].ratio_to_smallest
    verdict = "meets" if ratio is not None and ratio <= TARGET_RATIO else "misses"
    print(f"\n{results[-1].history:,} vs {results[0].history:,} rows of history: {ratio}x "
          f"({verdict} the {TARGET_RATIO}x target)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "command": "python -m bench.incremental_step " + " ".join(sys.argv[1:] if argv is None else argv),
        "batch": args.batch, "runs": args.runs, "table_updates": args.table_updates,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "results": [asdict(r) for r in results], "ratio": ratio, "target": TARGET_RATIO,
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
