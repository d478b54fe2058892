"""As-of join benchmark: our Spark plan against DuckDB's ASOF JOIN, polars' join_asof, the naive
Spark equi-join + window, and Tempo's asofJoin, on the same Parquet data (bench/datagen.py),
inner and left.

    .venv/bin/python -m bench.asof_join --sizes 1m:100k,5m:1m --hows left,inner --runs 3

Every engine computes the same as-of join (each event gets the version of its key with the
largest ts <= the event ts; inner drops events without one, left keeps them with nulls) and is
timed end to end: read the Parquet files, plan, run, materialize every output column. Spark
writes the result to the `noop` sink; DuckDB and polars aggregate every output column. Every
engine gets the same untimed runs (bench/harness.py): `--jvm-warmup-rounds` rounds of every Spark
engine on a small data set first (the JVM compiles hot code during its first runs, as a
long-lived cluster has long done), then, on the data it is timed on, one run that checksums
the result by content (bench/checksum.py, over the event id and the answering version's ts)
and `--warmup` runs of the timed form. The median of `--runs` runs is reported with its ratio to
DuckDB's median from the same invocation, printed as a table and saved to
bench/results/asof_join.json. Row counts and checksums must agree across engines, or the run
fails.

`spark_read` is no join: Spark reading both sides in full into the `noop` sink, one job each
(as the project's broadcast index runs one job per side), timed by the same protocol. It is the
floor under every Spark plan here, and puts the goal of a ratio to DuckDB in scale: DuckDB's
whole as-of join may take less than Spark takes to read its inputs.

A Spark engine that exceeds `--timeout` seconds on a run is cancelled and reported as a timeout
(the naive join is quadratic in a hot key's size and never finishes on skewed data).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.checksum import checksum_sql, pair_hash_polars
from bench.datagen import DataSet, data_set, generate, parse_size
from bench.harness import (
    Result,
    local_engine,
    machine,
    report,
    spark_engine,
    spark_read_floor,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RESULTS = Path(__file__).resolve().parent / "results" / "asof_join.json"
ENGINES = ("duckdb", "polars", "spark_read", "spark_asof", "spark_asof_index_shuffle", "spark_asof_sql",
           "spark_asof_shuffle", "spark_naive", "tempo")
# Our join's strategies: auto (the JVM index here), the index's shuffle form (for a table too large
# to broadcast), the pure-SQL broadcast plan, the SQL shuffle plan.
SPARK_ASOF = {"spark_asof": "auto", "spark_asof_index_shuffle": "index_shuffle",
              "spark_asof_sql": "broadcast", "spark_asof_shuffle": "shuffle"}
# The columns identifying a result row (event, answering version) in each Spark engine's output.
IDS = {**{engine: ("event_id", "table_valid_from") for engine in SPARK_ASOF},
       "spark_naive": ("event_id", "vts"), "tempo": ("event_id", "v_ts")}


# --- DuckDB and polars -----------------------------------------------------------------------

def duckdb_run(ds: DataSet, how: str, check: bool) -> Any:
    import duckdb

    select = (checksum_sql("e.event_id", "v.ts") if check else
              "count(*), sum(e.event_id), sum(e.key), sum(e.ts), sum(e.amount), "
              "sum(v.price), sum(v.qty), sum(v.ts)")
    kind = "LEFT " if how == "left" else ""
    con = duckdb.connect()
    try:
        row = con.execute(f"""
            SELECT {select}
            FROM read_parquet('{ds.glob("events")}') e
            ASOF {kind}JOIN read_parquet('{ds.glob("versions")}') v
              ON e.key = v.key AND e.ts >= v.ts""").fetchone()
    finally:
        con.close()
    assert row is not None
    return (int(row[0]), int(row[1] or 0)) if check else int(row[0])


def polars_run(ds: DataSet, how: str, check: bool) -> Any:
    import polars as pl

    events = pl.read_parquet(ds.glob("events")).sort("ts")
    versions = pl.read_parquet(ds.glob("versions")).sort("ts").rename({"ts": "vts"})
    # join_asof keeps every left row (a left join); inner drops those without a version.
    joined = events.join_asof(versions, left_on="ts", right_on="vts", by="key", strategy="backward",
                              check_sortedness=False)
    if how == "inner":
        joined = joined.drop_nulls("vts")
    if check:
        return joined.height, int(joined.select(pair_hash_polars("event_id", "vts").sum()).item())
    joined.select(pl.len(), pl.col("event_id", "key", "ts", "amount", "price", "qty", "vts").sum())
    return joined.height


# --- Spark -----------------------------------------------------------------------------------

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


def spark_asof(spark: SparkSession, ds: DataSet, how: str, strategy: str) -> DataFrame:
    from joins.asof import asof_join

    events, versions = read_sides(spark, ds)
    return asof_join(events, versions, stream_key="key", stream_ts="ts", table_key="key", table_ts="ts",
                     how=how, strategy=strategy)  # type: ignore[arg-type]


def spark_naive(spark: SparkSession, ds: DataSet, how: str) -> DataFrame:
    """Join on key to the versions at or before the event, keep the newest per event."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    events, versions = read_sides(spark, ds)
    versions = versions.withColumnRenamed("ts", "vts").withColumnRenamed("key", "vkey")
    on = (F.col("key") == F.col("vkey")) & (F.col("vts") <= F.col("ts"))
    candidates = events.join(versions, on, how).drop("vkey")
    newest_first = Window.partitionBy("event_id").orderBy(F.col("vts").desc())
    return (candidates.withColumn("rn", F.row_number().over(newest_first))
            .where(F.col("rn") == 1).drop("rn"))


def tempo_asof(spark: SparkSession, ds: DataSet, how: str) -> DataFrame:
    from pyspark.sql import functions as F
    from tempo import TSDF

    events, versions = read_sides(spark, ds)
    left = TSDF(events, ts_col="ts", partition_cols=["key"])
    right = TSDF(versions, ts_col="ts", partition_cols=["key"])
    joined = left.asofJoin(right, right_prefix="v").df  # a left join
    return joined if how == "left" else joined.where(F.col("v_ts").isNotNull())


def _builder(spark: SparkSession, ds: DataSet, engine: str, how: str) -> Callable[[], DataFrame]:
    if engine in SPARK_ASOF:
        return lambda: spark_asof(spark, ds, how, SPARK_ASOF[engine])
    if engine == "spark_naive":
        return lambda: spark_naive(spark, ds, how)
    return lambda: tempo_asof(spark, ds, how)


def _warm_jvm(spark: SparkSession, engines: list[str], hows: list[str], rounds: int) -> None:
    """Every Spark engine a few times on a small data set first: the JVM compiles the hot paths
    during the first runs, and without this the engine timed first would pay for it."""
    ds = generate(data_set(100_000, 10_000, "uniform"))
    print("warming up the JVM on", ds.name, flush=True)
    for _ in range(rounds):
        if "spark_read" in engines:
            for df in read_sides(spark, ds):
                df.write.format("noop").mode("overwrite").save()
        for engine in (e for e in engines if e != "spark_read"):
            for how in hows:
                with contextlib.suppress(ImportError):  # tempo may be absent
                    _builder(spark, ds, engine, how)().write.format("noop").mode("overwrite").save()


def run_size(spark: SparkSession | None, ds: DataSet, size: str, how: str, engines: list[str], *,
             runs: int, warmup: int, timeout: float) -> list[Result]:
    results = []
    for engine in engines:
        res = Result(size=size, dist=ds.dist, engine=engine, how=how)
        print(f"  {ds.name} {how} {engine} ...", flush=True)
        try:
            if engine == "duckdb":
                local_engine(lambda c: duckdb_run(ds, how, c), runs=runs, warmup=warmup, res=res)
            elif engine == "polars":
                local_engine(lambda c: polars_run(ds, how, c), runs=runs, warmup=warmup, res=res)
            elif engine == "spark_read":
                assert spark is not None
                spark_read_floor(spark, lambda: list(read_sides(spark, ds)), runs=runs,
                                 warmup=warmup, timeout=timeout, res=res)
            else:
                assert spark is not None
                if engine == "tempo":
                    import tempo  # noqa: F401
                spark_engine(spark, _builder(spark, ds, engine, how), IDS[engine], runs=runs,
                             warmup=warmup, timeout=timeout, res=res)
        except ImportError as exc:
            res.status, res.note = "skipped", f"not importable: {exc}"
        except Exception as exc:
            res.status, res.note = "error", f"{type(exc).__name__}: {str(exc)[:300]}"
        res.finish()
        results.append(res)
        print(f"    {res.status} median={res.median_s} rows={res.rows} checksum={res.checksum} "
              f"{res.note}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="As-of join benchmark (see module docstring).")
    parser.add_argument("--sizes", default="1m:100k", help="EVENTS:VERSIONS list, e.g. 1m:100k,5m:1m")
    parser.add_argument("--dists", default="uniform,skewed")
    parser.add_argument("--hows", default="left,inner")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs per engine and case")
    parser.add_argument("--jvm-warmup-rounds", type=int, default=10,
                        help="rounds of every Spark engine on a small data set before any timing")
    parser.add_argument("--timeout", type=float, default=120.0, help="per Spark run, seconds")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    hows = [h for h in args.hows.split(",") if h]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from {ENGINES}")

    spark = None
    spark_engines = [e for e in engines if e.startswith(("spark", "tempo"))]
    if spark_engines:
        from joins.spark import SparkSettings, get_spark

        spark = get_spark(SparkSettings(shuffle_partitions=args.shuffle_partitions, driver_memory="8g"))
        _warm_jvm(spark, spark_engines, hows, args.jvm_warmup_rounds)
    machine_before = machine()
    results: list[Result] = []
    for size in args.sizes.split(","):
        events, versions = parse_size(size)
        for dist in args.dists.split(","):
            ds = generate(data_set(events, versions, dist))
            for how in hows:
                results += run_size(spark, ds, size, how, engines, runs=args.runs,
                                    warmup=args.warmup, timeout=args.timeout)
    return report(results, reference="duckdb", args=vars(args), out=args.out,
                  command="python -m bench.asof_join " + " ".join(sys.argv[1:] if argv is None else argv),
                  machine_before=machine_before)


if __name__ == "__main__":
    raise SystemExit(main())
