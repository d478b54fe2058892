"""The primary-key table-table join on Spark: one incremental micro-batch against the size of
its state, and the temporal history (batch form) against the same computation in DuckDB.

    .venv/bin/python -m bench.table_table_join --keys 100000,10000000 --batch 10000 --runs 3 \
        --history 1000000

1. **Micro-batch** (target: at 10M keys per side at most 1.3x the cost at 100k). Per size, two
   changelog tables of N keys each (both sides versioned, one version per key) are joined by an
   untimed initial micro-batch (it builds the `current` state: N keys); then each timed batch
   lands `--batch` new updates (half per side, random keys, ts after the history, 1 % out of
   order) and runs `run_microbatch`. The median per size, the ratio of the largest size to the
   smallest, and the batch's phases (the runtime's timings) are printed.
2. **Temporal history** of `--history` versions per side (10 versions per key, 5 % deletes, both
   sides versioned): `temporal_history` (`joins.operators.table_table_join.history`, expiry scan
   included) against DuckDB SQL doing the same interval intersection (a running max for expiry,
   window `last_value ... IGNORE NULLS` per key) on the same Parquet files, every output column
   materialized by both (Spark: the `noop` sink; DuckDB: a temp table); row counts compared.

Results go to bench/results/table_table_join.json with the machine's load average: the machine
these were taken on is shared, so absolute times are noisy; the ratios are measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RESULTS = Path(__file__).resolve().parent / "results" / "table_table_join.json"
T0_MS = 1_700_000_000_000
DAY_MS = 86_400_000
RETENTION_MS = 30 * DAY_MS
TARGET_RATIO = 1.3


def _spec() -> Any:
    from joins.operators.table_table_join.spec import TableTableJoinSpec

    side = {"versioned": True, "history_retention_ms": RETENTION_MS}
    return TableTableJoinSpec.model_validate({"join": "left", "left": side, "right": side})


def _changelog(ids: DataFrame, key: Any, ts: Any, seq: Any, tomb: Any) -> DataFrame:
    from pyspark.sql import functions as F

    value = F.when(~tomb, (F.col("id") % 997).cast("double"))
    return ids.select(key.cast("long").alias("key"), value.alias("value"), ts.cast("long").alias("ts"),
                      tomb.alias("tombstone"), seq.cast("long").alias("_seq"))


def initial(spark: SparkSession, n: int, side: int) -> DataFrame:
    """One version per key, ts within the first day."""
    from pyspark.sql import functions as F

    ids = spark.range(n)
    ts = F.lit(T0_MS) + (F.col("id") * 7919 + side) % F.lit(DAY_MS)
    return _changelog(ids, F.col("id"), ts, F.col("id"), F.lit(False))


def updates(spark: SparkSession, n: int, keys: int, *, first: int, t_start: int) -> DataFrame:
    """`n` updates of random keys after the history; one in a hundred older than its key's
    latest version (out of order: ignored by a versioned side)."""
    from pyspark.sql import functions as F

    ids = spark.range(first, first + n)
    late = (F.col("id") % 100) == 0
    ts = F.when(late, F.lit(T0_MS)).otherwise(F.lit(t_start) + (F.col("id") - first))
    return _changelog(ids, (F.col("id") * 2654435761) % keys, ts, F.col("id"), F.lit(False))


def run_size(spark: SparkSession, keys: int, *, batch: int, runs: int, workdir: Path) -> dict[str, Any]:
    from joins.lake import write_delta
    from joins.operators.table_table_join.spark_incremental import run_microbatch

    run_dir = Path(tempfile.mkdtemp(prefix=f"ttj-{keys}-", dir=workdir))
    sources = {s: str(run_dir / s) for s in ("left", "right")}
    for n, path in enumerate(sources.values()):
        write_delta(initial(spark, keys, n), path, mode="append")
    root = str(run_dir / "join")
    started = time.perf_counter()
    first = run_microbatch(spark, _spec(), root, left_source=sources["left"], right_source=sources["right"])
    load_s = time.perf_counter() - started
    times, phases, outs = [], {}, []
    seq, t_next = keys, T0_MS + DAY_MS
    for n in range(runs + 1):
        for path in sources.values():
            write_delta(updates(spark, batch // 2, keys, first=seq, t_start=t_next), path, mode="append")
            seq += batch // 2
        t_next += batch
        started = time.perf_counter()
        report = run_microbatch(spark, _spec(), root, left_source=sources["left"],
                                right_source=sources["right"])
        elapsed = time.perf_counter() - started
        if n == 0:
            continue  # warm-up: the first updates batch after the load compiles its plans
        times.append(round(elapsed, 3))
        outs.append(report.rows_out)
        for name, secs in report.timings.items():
            phases.setdefault(name, []).append(secs)
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"keys_per_side": keys, "batch": batch, "initial_load_s": round(load_s, 1),
            "initial_rows_out": first.rows_out, "times_s": times,
            "median_s": round(statistics.median(times), 3), "rows_out": outs,
            "phases_s": {k: round(statistics.median(v), 3) for k, v in phases.items()}}


def history_inputs(spark: SparkSession, n: int, workdir: Path) -> dict[str, str]:
    """Two Parquet changelogs of `n` versions each: 10 per key, 5 % deletes."""
    from pyspark.sql import functions as F

    keys = max(n // 10, 1)
    paths = {}
    for side in (0, 1):
        ids = spark.range(n)
        ts = F.lit(T0_MS) + ((F.col("id") * (7919 + side)) % F.lit(20 * DAY_MS))
        df = _changelog(ids, (F.col("id") * (40503 + side)) % keys, ts, F.col("id"),
                        (F.col("id") * 31 + side) % 20 == 0)
        path = str(workdir / f"history_{side}")
        df.write.mode("overwrite").parquet(path)
        paths["left" if side == 0 else "right"] = path
    return paths


DUCKDB_SQL = """
WITH {sides},
ev AS (
  SELECT key, ts, 0 AS side, _seq, {{'p': NOT tombstone, 'v': value}} AS l, NULL AS r FROM l_stored
  UNION ALL
  SELECT key, ts, 1 AS side, _seq, NULL AS l, {{'p': NOT tombstone, 'v': value}} AS r FROM r_stored),
cur AS (
  SELECT key, ts,
    last_value(l IGNORE NULLS) OVER w AS lc, last_value(r IGNORE NULLS) OVER w AS rc,
    lead(ts) OVER (PARTITION BY key ORDER BY ts, side, _seq) AS nxt
  FROM ev
  WINDOW w AS (PARTITION BY key ORDER BY ts, side, _seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))
SELECT key, CASE WHEN lc.p THEN lc.v END AS left_value, CASE WHEN rc.p THEN rc.v END AS right_value,
  coalesce(lc.p, false) AS has_left, coalesce(rc.p, false) AS has_right, ts AS valid_from,
  nxt AS valid_to, CAST(to_timestamp(ts / 1000) AS DATE) AS event_date
FROM cur WHERE (nxt IS NULL OR nxt <> ts) AND coalesce(lc.p, false)
"""
SIDE_SQL = """{s}_st AS (
  SELECT *, max(ts) OVER (ORDER BY _seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS st
  FROM read_parquet('{path}/*.parquet')),
{s}_stored AS (SELECT * FROM {s}_st WHERE st IS NULL OR ts >= st - {ret})"""


def run_history(spark: SparkSession, n: int, *, runs: int, workdir: Path) -> dict[str, Any]:
    import duckdb

    from joins.operators.table_table_join.columns import TableTableColumns
    from joins.operators.table_table_join.history import temporal_history

    paths = history_inputs(spark, n, workdir)
    schema = "key long, value double, ts long, tombstone boolean, _seq long"
    sql = DUCKDB_SQL.format(sides=",\n".join(
        SIDE_SQL.format(s=s[0], path=p, ret=RETENTION_MS) for s, p in paths.items()))
    con = duckdb.connect()
    con.execute(f"SET threads TO {os.cpu_count() or 2}")
    ours, theirs, rows = [], [], {}
    for _ in range(runs + 1):
        started = time.perf_counter()
        left, right = (spark.read.schema(schema).parquet(paths[s]) for s in ("left", "right"))
        history = temporal_history(left, right, _spec(), TableTableColumns())
        history.write.format("noop").mode("overwrite").save()
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        con.execute(f"CREATE OR REPLACE TEMP TABLE h AS {sql}")
        theirs.append(time.perf_counter() - started)
    rows["duckdb"] = con.execute("SELECT count(*) FROM h").fetchone()[0]
    inputs = [spark.read.schema(schema).parquet(paths[s]) for s in ("left", "right")]
    rows["spark"] = temporal_history(*inputs, _spec(), TableTableColumns()).count()
    ours, theirs = ours[1:], theirs[1:]  # the first run warms the JVM and the OS cache up
    spark_s, duck_s = statistics.median(ours), statistics.median(theirs)
    return {"versions_per_side": n, "spark_s": round(spark_s, 3), "duckdb_s": round(duck_s, 3),
            "ratio": round(spark_s / duck_s, 2), "rows": rows, "agree": rows["duckdb"] == rows["spark"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.table_table_join", description=__doc__)
    parser.add_argument("--keys", default="100000,10000000")
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--history", type=int, default=1_000_000, help="0: skip the history bench")
    args = parser.parse_args(argv)
    from joins.spark import SparkSettings, get_spark

    spark = get_spark(SparkSettings.from_env())
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="tj-bench-ttj-"))
    out: dict[str, Any] = {"command": "python -m bench.table_table_join " + " ".join(argv or []),
                           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                       "load_average_before": list(os.getloadavg())},
                           "targets": {"largest_over_smallest": TARGET_RATIO}, "microbatch": []}
    try:
        for keys in [int(k) for k in args.keys.split(",")]:
            result = run_size(spark, keys, batch=args.batch, runs=args.runs, workdir=workdir)
            out["microbatch"].append(result)
            print(json.dumps(result), flush=True)
        sizes = out["microbatch"]
        if len(sizes) > 1:
            out["ratio_largest_over_smallest"] = round(sizes[-1]["median_s"] / sizes[0]["median_s"], 2)
            print(f"micro-batch: {sizes[-1]['keys_per_side']} keys / {sizes[0]['keys_per_side']} keys "
                  f"= {out['ratio_largest_over_smallest']} (target <= {TARGET_RATIO})", flush=True)
        if args.history:
            out["history"] = run_history(spark, args.history, runs=args.runs, workdir=workdir)
            print(json.dumps(out["history"]), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out["machine"]["load_average_after"] = list(os.getloadavg())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
