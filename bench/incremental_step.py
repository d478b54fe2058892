"""Latency of one incremental stream-table join micro-batch, against the size of the table
history and against the least a micro-batch must do.

    .venv/bin/python -m bench.incremental_step --history 100000,10000000 --batch 10000,100 --runs 5

Targets (issues 8 and 27): warm, end to end, a 10k-event micro-batch at most 2 s on 100k rows of
history and at most 1.3x that on 10M rows; a 100-event micro-batch at most 1 s; and at most 1x
the floor measured in the same run. The floor (bench/floor_step.py) is the same micro-batch
written by hand with plain PySpark and delta-spark, independent of the project's code: read the
stream's rows added since the last batch by Delta version, read the table's versions of just
the batch's keys, pick each event's version by a window, append with `format("delta")`. No
grace buffer, no batch log, no writer lease, no metrics, and no state kept between batches.
Phases of each micro-batch (the runtime's own timings) are printed too.

Per history size: a versioned Delta table (the `joins.operators.versioned_table` layout, 10
versions per key over 30 days of event time, partitioned by event day) is generated once under
bench/data/. Each run starts a fresh join (stream source + join root) and a fresh floor job, and
times both on `--cold` first batches, reported apart as cold (the first batch of a join reads
the table's whole changelog once, for its stream time, and in a new process the table's
history, or its window, into the held index; the floor's first batch compiles its plan), then
on `--runs` batches of `--batch` new events each (keys drawn from the table's keys, event times
just after the history, slightly out of order, a grace period covering the disorder) plus
`--table-updates` new table versions landed before each batch. The steady-state medians (with
min-max) per size, the cold batches, the ratio of the largest size to the smallest, and a check
that the floor answered every event both wrote as the runtime did are printed and saved to
bench/results/incremental_step.json (or --out). --held-max-rows 0 times the batches with the
table's history narrowed to each batch's keys instead of held from batch to batch. The 10M
table is too large to hold whole: its window is held (joins.asof.window), and every batch's
lookups lie within it.
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

from bench.floor_step import FloorJob
from joins.asof import HELD_MAX_ROWS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DATA = Path(__file__).resolve().parent / "data"
RESULTS = Path(__file__).resolve().parent / "results" / "incremental_step.json"
DAY_MS = 86_400_000
T0_MS = 1_700_000_000_000
SPAN_MS = 30 * DAY_MS
VERSIONS_PER_KEY = 10
GRACE_MS = 60_000
# A batch spans this much event time whatever its size, so that stream time moves past grace
# and every batch emits rows (a 100-event batch too).
BATCH_SPAN_MS = 120_000
TARGET_RATIO = 1.3


@dataclass
class SizeResult:
    history: int
    batch: int
    keys: int
    times_s: list[float] = field(default_factory=list)
    floor_s: list[float] = field(default_factory=list)
    cold_s: list[float] = field(default_factory=list)  # the first batches, apart
    floor_cold_s: list[float] = field(default_factory=list)
    median_s: float | None = None
    floor_median_s: float | None = None
    ratio_to_floor: float | None = None
    rows_out: list[int] = field(default_factory=list)
    floor_rows_out: list[int] = field(default_factory=list)
    answers_checked: int = 0  # events answered by both, compared
    answers_newer: int = 0  # answered by a version landed later (grace), then errors:
    answers_wrong: int = 0
    phases_s: dict[str, float] = field(default_factory=dict)   # median per phase
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
    step = max(1, BATCH_SPAN_MS // n)
    # Disorder well inside the grace period: each event up to 20 s early.
    ts = F.lit(t_start) + (F.col("id") - first_seq) * step - (F.col("id") * 104729) % 20_000
    return ids.select(
        ((F.col("id") * 2654435761) % keys).cast("long").alias("key"),
        (F.col("id") % 97).cast("double").alias("amount"),
        ts.cast("long").alias("ts"),
        F.to_date(F.timestamp_millis(ts.cast("long"))).alias("event_date"),
        F.col("id").cast("long").alias("_seq"))


def run_size(spark: SparkSession, history: int, *, batch: int, runs: int, cold: int,
             table_updates: int, workdir: Path,
             held_max_rows: int = HELD_MAX_ROWS) -> SizeResult:
    from joins.lake import write_delta
    from joins.operators.stream_table_join.spark_incremental import JoinPaths, run_microbatch

    keys = max(history // VERSIONS_PER_KEY, 1)
    source = history_table(spark, history)
    run_dir = Path(tempfile.mkdtemp(prefix=f"step-{history}-{batch}-", dir=workdir))
    table = run_dir / "table"
    shutil.copytree(source, table)  # each size's runs append table updates to their own copy
    stream = str(run_dir / "stream")
    paths = JoinPaths(str(run_dir / "join"))
    spec = _spec()
    result = SizeResult(history=history, batch=batch, keys=keys)
    phases: dict[str, list[float]] = {}
    t_next = T0_MS + SPAN_MS
    seq = 0
    next_arrival = history
    floor = FloorJob(spark, stream, str(table), str(run_dir / "floor"))
    for n in range(cold + runs):
        if table_updates:
            write_delta(_update_rows(spark, table_updates, keys, first_id=next_arrival,
                                     batch_id=n + 1, t_min=t_next - GRACE_MS, t_span=GRACE_MS),
                        str(table), mode="append", partition_by=["event_date"])
            next_arrival += table_updates
        write_delta(_events(spark, batch, keys, first_seq=seq, t_start=t_next), stream,
                    mode="append", partition_by=["event_date"])
        seq += batch
        t_next += BATCH_SPAN_MS
        if n % 2:  # alternate which runs first, so that neither always finds the caches warm
            floor_s, floor_rows = floor.batch()
        started = time.perf_counter()
        report = run_microbatch(spark, spec, paths, stream_source=stream, table_source=str(table),
                                held_max_rows=held_max_rows)
        elapsed = time.perf_counter() - started
        if not n % 2:
            floor_s, floor_rows = floor.batch()
        label = f"cold {n + 1}" if n < cold else f"#{n - cold + 1}"
        shown = "  ".join(f"{k} {v:.2f}" for k, v in report.timings.items())
        print(f"history {history:>10,}  batch {batch:>6,} {label}: {elapsed:6.2f} s (floor "
              f"{floor_s:5.2f} s)  rows out {report.rows_out:,} (floor {floor_rows:,})  | {shown}",
              flush=True)
        if n < cold:
            result.cold_s.append(round(elapsed, 3))
            result.floor_cold_s.append(round(floor_s, 3))
            continue
        result.times_s.append(round(elapsed, 3))
        result.floor_s.append(round(floor_s, 3))
        result.rows_out.append(report.rows_out)
        result.floor_rows_out.append(floor_rows)
        for name, secs in report.timings.items():
            phases.setdefault(name, []).append(secs)
    result.median_s = statistics.median(result.times_s)
    result.floor_median_s = statistics.median(result.floor_s)
    result.ratio_to_floor = round(result.median_s / result.floor_median_s, 3)
    result.phases_s = {k: round(statistics.median(v), 3) for k, v in phases.items()}
    (result.answers_checked, result.answers_newer,
     result.answers_wrong) = same_answers(spark, paths.output, floor.out)
    shutil.rmtree(run_dir, ignore_errors=True)
    return result


def same_answers(spark: SparkSession, ours: str, floor: str) -> tuple[int, int, int]:
    """(events answered by both, answered differently, of which not explained by grace): the
    floor must compute the same join, or it is no floor. The runtime holds events back for the
    grace period, so a version that lands after the floor answered an event may answer it in
    the runtime (a newer version, never an older one); only other differences are errors."""
    from pyspark.sql import functions as F

    from joins.lake import read_delta

    mine = read_delta(spark, ours).select("_seq", F.col("table_rate").alias("r1"),
                                          F.col("table_valid_from").alias("v1"))
    theirs = read_delta(spark, floor).select("_seq", F.col("rate").alias("r2"),
                                             F.col("table_valid_from").alias("v2"))
    differ = ~(F.col("r1").eqNullSafe(F.col("r2")) & F.col("v1").eqNullSafe(F.col("v2")))
    newer = F.col("v1").isNotNull() & (F.col("v2").isNull() | (F.col("v1") > F.col("v2")))
    row = mine.join(theirs, "_seq").agg(
        F.count("*").alias("n"), F.sum(F.when(differ, 1).otherwise(0)).alias("differ"),
        F.sum(F.when(differ & ~newer, 1).otherwise(0)).alias("bad")).first()
    return int(row["n"]), int(row["differ"] or 0), int(row["bad"] or 0)


def _spread(times: list[float]) -> str:
    return f"{min(times):.2f}-{max(times):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.incremental_step", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", default="100000,10000000",
                        help="comma-separated history sizes (rows of the versioned table)")
    parser.add_argument("--batch", default="10000,100", help="comma-separated new events per batch")
    parser.add_argument("--runs", type=int, default=5, help="timed micro-batches per size")
    parser.add_argument("--cold", type=int, default=2,
                        help="first micro-batches per size, reported apart from the steady state")
    parser.add_argument("--table-updates", type=int, default=100,
                        help="new table versions landed before each batch")
    parser.add_argument("--held-max-rows", type=int, default=HELD_MAX_ROWS,
                        help="run_microbatch's held_max_rows (default: its own; 0 = the table's "
                             "history is never held, each batch narrows it to its keys)")
    parser.add_argument("--out", "--results", dest="out", type=Path, default=RESULTS,
                        help="where to save the results (--results: the old name)")
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.history.split(",") if s]
    batches = [int(s.replace("_", "")) for s in args.batch.split(",") if s]

    from joins.spark import get_spark

    spark = get_spark()
    DATA.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="incremental-step-", dir=DATA))
    results = []
    try:
        for b in batches:
            for h in sizes:
                results.append(run_size(spark, h, batch=b, runs=args.runs, cold=args.cold,
                                        table_updates=args.table_updates, workdir=workdir,
                                        held_max_rows=args.held_max_rows))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{'batch':>7} {'history':>12} {'median s':>9} {'min-max':>10} {'floor s':>8} "
          f"{'min-max':>10} {'/floor':>7} {'/smallest':>9} {'cold s':>12} {'floor cold':>12} "
          "wrong/grace/compared answers")
    for r in results:
        smallest = next(x for x in results if x.batch == r.batch).median_s
        assert r.median_s is not None and r.floor_median_s is not None and smallest
        r.ratio_to_smallest = round(r.median_s / smallest, 3)
        cold = "/".join(f"{x:.2f}" for x in r.cold_s)
        floor_cold = "/".join(f"{x:.2f}" for x in r.floor_cold_s)
        print(f"{r.batch:>7,} {r.history:>12,} {r.median_s:>9.2f} {_spread(r.times_s):>10} "
              f"{r.floor_median_s:>8.2f} {_spread(r.floor_s):>10} {r.ratio_to_floor:>7.2f} "
              f"{r.ratio_to_smallest:>9.2f} {cold:>12} {floor_cold:>12} "
              f"{r.answers_wrong}/{r.answers_newer}/{r.answers_checked}")
        print("    phases (median s): " + ", ".join(f"{k} {v:.2f}" for k, v in r.phases_s.items()))
    print(f"load average {os.getloadavg()}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": "python -m bench.incremental_step " + " ".join(sys.argv[1:] if argv is None else argv),
        "runs": args.runs, "table_updates": args.table_updates,
        "held_max_rows": args.held_max_rows,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average": os.getloadavg()},
        "targets": {"10k_on_100k_s": 2.0, "100_s": 1.0, "10M_over_100k": TARGET_RATIO,
                    "over_floor": 1.0},
        "results": [asdict(r) for r in results],
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
