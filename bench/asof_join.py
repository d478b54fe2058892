"""As-of join benchmark: our Spark plan against DuckDB's ASOF JOIN, polars' join_asof, the naive
Spark equi-join + window, and Tempo's asofJoin, on the same Parquet data (bench/datagen.py).

    .venv/bin/python -m bench.asof_join --sizes 1m:100k,5m:1m --dists uniform,skewed --runs 3

Every engine computes the same inner as-of join (each event gets the version of its key with
the largest ts <= the event ts) and is timed end to end: read the Parquet files, plan, run,
materialize every output column. Spark writes the result to the `noop` sink; DuckDB and polars
aggregate every output column. Untimed runs come first: `--jvm-warmup-rounds` rounds of every
Spark engine on a small data set, then `--warmup` runs of each engine on the data it is timed on.
The JVM compiles hot code during the first runs, as a long-lived cluster has long done; measured
here, with 3 small rounds and 2 runs the first Spark engine timed still ran at 2x the time the
same engine took later in the same process. The median of `--runs` runs is
reported with its ratio to DuckDB's median from the same invocation, printed as a table and
saved to bench/results/asof_join.json. Row counts must agree across engines, or the run fails.

A Spark engine that exceeds `--timeout` seconds is cancelled and reported as a timeout (the
naive join is quadratic in a hot key's size and never finishes on skewed data).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.datagen import DataSet, data_set, generate, parse_size

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RESULTS = Path(__file__).resolve().parent / "results" / "asof_join.json"
ENGINES = ("duckdb", "polars", "spark_asof", "spark_asof_sql", "spark_asof_shuffle", "spark_naive", "tempo")
# Our join's strategies: auto (the JVM index here), the pure-SQL broadcast plan, the shuffle plan.
SPARK_ASOF = {"spark_asof": "auto", "spark_asof_sql": "broadcast", "spark_asof_shuffle": "shuffle"}


@dataclass
class Result:
    size: str
    dist: str
    engine: str
    status: str = "ok"  # ok | timeout | skipped | error
    times_s: list[float] = field(default_factory=list)
    rows: int | None = None
    note: str = ""
    median_s: float | None = None
    ratio_to_duckdb: float | None = None


class Timeout(Exception):
    pass


def _timed(fn: Callable[[], int], runs: int, warmup: int) -> tuple[list[float], int]:
    rows = -1
    for _ in range(warmup):
        rows = fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        rows = fn()
        times.append(time.perf_counter() - start)
    return times, rows


# --- DuckDB and polars -----------------------------------------------------------------------

def duckdb_once(ds: DataSet) -> int:
    import duckdb

    con = duckdb.connect()
    try:
        row = con.execute(f"""
            SELECT count(*), sum(e.event_id), sum(e.key), sum(e.ts), sum(e.amount),
                   sum(v.price), sum(v.qty), sum(v.ts)
            FROM read_parquet('{ds.glob("events")}') e
            ASOF JOIN read_parquet('{ds.glob("versions")}') v
              ON e.key = v.key AND e.ts >= v.ts""").fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0])


def polars_once(ds: DataSet) -> int:
    import polars as pl

    events = pl.read_parquet(ds.glob("events")).sort("ts")
    versions = pl.read_parquet(ds.glob("versions")).sort("ts").rename({"ts": "vts"})
    joined = (events.join_asof(versions, left_on="ts", right_on="vts", by="key", strategy="backward",
                               check_sortedness=False)
              .drop_nulls("vts"))
    joined.select(pl.len(), pl.col("event_id", "key", "ts", "amount", "price", "qty", "vts").sum())
    return joined.height


# --- Spark -----------------------------------------------------------------------------------

def _spark_action(spark: SparkSession, action: Callable[[], Any], timeout: float) -> Any:
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


_ARROW_TO_SPARK = {"int64": "bigint", "int32": "int", "double": "double", "string": "string"}


def _ddl(path: Path) -> str:
    import pyarrow.parquet as pq

    schema = pq.read_schema(next(path.glob("*.parquet")))
    return ", ".join(f"`{f.name}` {_ARROW_TO_SPARK[str(f.type)]}" for f in schema)


def read_sides(spark: SparkSession, ds: DataSet) -> tuple[DataFrame, DataFrame]:
    """Both sides, read with their schema given, as a Delta or catalog table supplies it: left to
    infer it from the Parquet footers, Spark runs one extra job per side (~70 ms here), the same
    for every Spark engine, which says nothing about the join."""
    events = spark.read.schema(_ddl(ds.events_path)).parquet(str(ds.events_path))
    versions = spark.read.schema(_ddl(ds.versions_path)).parquet(str(ds.versions_path))
    return events, versions


def spark_asof(spark: SparkSession, ds: DataSet, strategy: str) -> DataFrame:
    from joins.asof import asof_join

    events, versions = read_sides(spark, ds)
    return asof_join(events, versions, stream_key="key", stream_ts="ts", table_key="key", table_ts="ts",
                     how="inner", strategy=strategy)  # type: ignore[arg-type]


def spark_naive(spark: SparkSession, ds: DataSet) -> DataFrame:
    """Equi-join on key, keep versions at or before the event, rank by version ts per event."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    events, versions = read_sides(spark, ds)
    versions = versions.withColumnRenamed("ts", "vts")
    candidates = events.join(versions, "key").where(F.col("vts") <= F.col("ts"))
    newest_first = Window.partitionBy("event_id").orderBy(F.col("vts").desc())
    return (candidates.withColumn("rn", F.row_number().over(newest_first))
            .where(F.col("rn") == 1).drop("rn"))


def tempo_asof(spark: SparkSession, ds: DataSet) -> DataFrame:
    from pyspark.sql import functions as F
    from tempo import TSDF

    events, versions = read_sides(spark, ds)
    left = TSDF(events, ts_col="ts", partition_cols=["key"])
    right = TSDF(versions, ts_col="ts", partition_cols=["key"])
    joined = left.asofJoin(right, right_prefix="v").df
    # Tempo keeps unmatched events (a left join); the others are inner joins.
    return joined.where(F.col("v_ts").isNotNull())


def _spark_engine(spark: SparkSession, build: Callable[[], DataFrame], *, runs: int, warmup: int,
                  timeout: float, res: Result) -> None:
    try:
        # Untimed: the row count to compare across engines.
        res.rows = int(_spark_action(spark, lambda: build().count(), timeout))

        def once() -> int:
            _spark_action(spark, lambda: build().write.format("noop").mode("overwrite").save(), timeout)
            return res.rows or 0

        res.times_s, _ = _timed(once, runs, warmup)
    except Timeout as exc:
        res.status, res.note = "timeout", str(exc)


def _warm_jvm(spark: SparkSession, engines: list[str], rounds: int) -> None:
    """Run every Spark engine a few times on a small data set first: the JVM compiles the hot
    paths during the first runs, and without this the engine timed first would pay for it."""
    ds = generate(data_set(100_000, 10_000, "uniform"))
    builders: dict[str, Callable[[], DataFrame]] = {
        **{engine: (lambda s=strategy: spark_asof(spark, ds, s)) for engine, strategy in SPARK_ASOF.items()},
        "spark_naive": lambda: spark_naive(spark, ds),
        "tempo": lambda: tempo_asof(spark, ds),
    }
    print("warming up the JVM on", ds.name, flush=True)
    for _ in range(rounds):
        for engine in engines:
            with contextlib.suppress(ImportError):  # tempo may be absent
                builders[engine]().write.format("noop").mode("overwrite").save()


def _machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {"cpus": os.cpu_count(), "loadavg_1_5_15": [round(x, 2) for x in load],
            "python": platform.python_version(), "platform": platform.platform()}


def run_size(spark: SparkSession | None, ds: DataSet, size: str, engines: list[str], *, runs: int,
             warmup: int, timeout: float) -> list[Result]:
    results = []
    for engine in engines:
        res = Result(size=size, dist=ds.dist, engine=engine)
        print(f"  {ds.name} {engine} ...", flush=True)
        try:
            if engine == "duckdb":
                res.times_s, res.rows = _timed(lambda: duckdb_once(ds), runs, warmup)
            elif engine == "polars":
                res.times_s, res.rows = _timed(lambda: polars_once(ds), runs, warmup)
            elif engine in SPARK_ASOF:
                assert spark is not None
                strategy = SPARK_ASOF[engine]
                _spark_engine(spark, lambda s=strategy: spark_asof(spark, ds, s), runs=runs,
                              warmup=warmup, timeout=timeout, res=res)
            elif engine == "spark_naive":
                assert spark is not None
                # Quadratic on a hot key: no warm-up, fail fast.
                _spark_engine(spark, lambda: spark_naive(spark, ds), runs=runs, warmup=0,
                              timeout=timeout, res=res)
            elif engine == "tempo":
                assert spark is not None
                try:
                    import tempo  # noqa: F401
                except ImportError as exc:
                    res.status, res.note = "skipped", f"dbl-tempo not importable: {exc}"
                else:
                    _spark_engine(spark, lambda: tempo_asof(spark, ds), runs=runs, warmup=min(warmup, 1),
                                  timeout=timeout, res=res)
        except Exception as exc:
            res.status, res.note = "error", f"{type(exc).__name__}: {str(exc)[:300]}"
        if res.times_s:
            res.median_s = statistics.median(res.times_s)
        results.append(res)
        print(f"    {res.status} median={res.median_s} rows={res.rows} {res.note}", flush=True)
    duck = next((r for r in results if r.engine == "duckdb" and r.median_s), None)
    for res in results:
        if duck is not None and duck.median_s and res.median_s:
            res.ratio_to_duckdb = res.median_s / duck.median_s
    return results


def print_table(results: list[Result]) -> None:
    header = f"{'size':<10} {'dist':<8} {'engine':<19} {'median s':>9} {'x DuckDB':>9} {'rows':>9}  status"
    print(header)
    print("-" * len(header))
    for r in results:
        median = f"{r.median_s:.3f}" if r.median_s is not None else "-"
        ratio = f"{r.ratio_to_duckdb:.2f}" if r.ratio_to_duckdb is not None else "-"
        rows = str(r.rows) if r.rows is not None else "-"
        status = r.status if not r.note else f"{r.status} ({r.note})"
        print(f"{r.size:<10} {r.dist:<8} {r.engine:<19} {median:>9} {ratio:>9} {rows:>9}  {status}")


def check_rows(results: list[Result]) -> list[str]:
    problems = []
    for size, dist in {(r.size, r.dist) for r in results}:
        group = [r for r in results if (r.size, r.dist) == (size, dist) and r.status == "ok"]
        counts = {r.engine: r.rows for r in group}
        if len(set(counts.values())) > 1:
            problems.append(f"{size} {dist}: row counts differ: {counts}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="As-of join benchmark (see module docstring).")
    parser.add_argument("--sizes", default="1m:100k", help="EVENTS:VERSIONS list, e.g. 1m:100k,5m:1m")
    parser.add_argument("--dists", default="uniform,skewed")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs per engine and data set")
    parser.add_argument("--jvm-warmup-rounds", type=int, default=10,
                        help="rounds of every Spark engine on a small data set before any timing")
    parser.add_argument("--timeout", type=float, default=120.0, help="per Spark run, seconds")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--no-jvm-warmup", dest="jvm_warmup", action="store_false",
                        help="skip the small warm-up of all Spark engines before timing")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from {ENGINES}")

    spark = None
    if any(e.startswith(("spark", "tempo")) for e in engines):
        from joins.spark import SparkSettings, get_spark

        spark = get_spark(SparkSettings(shuffle_partitions=args.shuffle_partitions, driver_memory="8g"))

    if spark is not None and args.jvm_warmup:
        _warm_jvm(spark, [e for e in engines if e.startswith(("spark", "tempo"))], args.jvm_warmup_rounds)
    machine_before = _machine()
    results: list[Result] = []
    for size in args.sizes.split(","):
        events, versions = parse_size(size)
        for dist in args.dists.split(","):
            ds = generate(data_set(events, versions, dist))
            results += run_size(spark, ds, size, engines, runs=args.runs, warmup=args.warmup,
                                timeout=args.timeout)
    print()
    print_table(results)
    problems = check_rows(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine_before": machine_before, "machine_after": _machine(),
        "args": {k: str(v) for k, v in vars(args).items()},
        "results": [asdict(r) for r in results], "row_count_problems": problems,
    }, indent=2) + "\n")
    print(f"\nsaved {args.out}")
    for problem in problems:
        print(f"ROW COUNT MISMATCH: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
