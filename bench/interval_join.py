"""Interval join benchmark (batch form): our Spark join against DuckDB's fastest fair plan (a
time-binned join) and a hand-written binned Spark join, on the same Parquet data, inner and left,
ratios from one run.

    .venv/bin/python -m bench.interval_join --sizes 1m --dists uniform,skewed --hows inner,left --runs 3

The join: `l.key = r.key AND r.ts BETWEEN l.ts - 300000 AND l.ts + 300000` (± 300 s) between two
event streams of N rows each (`bench/datagen.py`'s keys: uniform with 1,000 rows per key, or 3
keys holding 80 % of the rows; event times over `--span-days`). Every engine is timed end to
end: read the Parquet files, plan, run, materialize every output column (Spark: the `noop` sink;
DuckDB: an aggregate over every output column). Every engine gets the same untimed runs
(bench/harness.py): a small-data JVM warm-up round for the Spark plans, then on the timed data
one run that checksums the result by content (bench/checksum.py, over the left and right ids)
and `--warmup` runs of the timed form. The headline is ours ÷ DuckDB binned.

- `duckdb_binned` (the reference): the join on (key, time bin of width 2 × bound), the right
  side exploded into the bins its window reaches, so each pair is found once;
- `duckdb_plain`: the SQL as written (a hash join on the key, the range a filter: a hot key
  compares all its pairs); shown for scale, not a fair peer of a binned plan;
- `polars_binned`: the same binned join in polars (its joins take equalities only, so the range is
  a filter after the join on (key, bin); a left join adds the left rows with no pair, padded);
- `spark_binned`: the same binned join written by hand in plain PySpark (a peer);
- `spark_plain`: Spark's equi-join on the key plus the range filter;
- `ours`: `joins.operators.interval_join.spark_batch.interval_join` (keys plus time bins), its
  rows as they come (the peers' columns plus lineage `_l_seq`, `_r_seq` and `_kind`);
- `ours_projected`: the same, with only the peers' eight columns selected;
- `--bin-ms W,...`: ours again with time bins of width W ms (`ours_bin<W/1000>s`).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from bench.checksum import checksum_sql
from bench.datagen import DATA_DIR, HOT_KEYS, T0_MS, _draw_keys, _write, parse_count
from bench.harness import (
    Result,
    child_engine,
    machine,
    report,
    spark_engine,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

RESULTS = Path(__file__).resolve().parent / "results" / "interval_join.json"
ENGINES = ("duckdb_binned", "duckdb_plain", "polars_binned", "spark_binned", "spark_plain", "ours",
           "ours_projected")
BOUND_MS = 300_000
WIDTH_MS = 2 * BOUND_MS
CONDITION = f"r.ts BETWEEN l.ts - {BOUND_MS} AND l.ts + {BOUND_MS} AND l.key = r.key"
ROWS_PER_KEY = 1000  # uniform: keys = rows / ROWS_PER_KEY
OUTPUT = ("l.id AS l_id, l.key AS l_key, l.ts AS l_ts, l.amount, "
          "r.id AS r_id, r.key AS r_key, r.ts AS r_ts, r.qty")
PEER_COLUMNS = ("l_id", "l_key", "l_ts", "amount", "r_id", "r_key", "r_ts", "qty")


def data_dir(rows: int, dist: str, span_days: int) -> Path:
    return DATA_DIR / f"interval_{dist}_{rows}_{span_days}d"


def generate(rows: int, dist: str, span_days: int, seed: int = 11) -> Path:
    root = data_dir(rows, dist, span_days)
    if (root / "_SUCCESS").exists():
        return root
    rng = np.random.default_rng(seed)
    keys = max(HOT_KEYS + 1, rows // ROWS_PER_KEY)
    span = span_days * 86_400_000
    for side, payload in (("left", "amount"), ("right", "qty")):
        ts = np.sort(T0_MS + rng.integers(0, span, rows, dtype=np.int64))
        table = pa.table({"id": np.arange(rows, dtype=np.int64), "key": _draw_keys(rng, rows, keys, dist),
                          "ts": ts, payload: np.round(rng.random(rows) * 100, 2)})
        _write(table, root / side)
    (root / "_SUCCESS").touch()
    return root


def _glob(root: Path, side: str) -> str:
    return str(root / side / "*.parquet")


def duckdb_run(root: str, binned: bool, how: str, *, check: bool) -> Any:
    """One DuckDB run: (rows, checksum) if `check`, else the timed aggregate over every output
    column. Module-level: it runs in a spawned child (harness.child_engine)."""
    import duckdb

    left, right = _glob(Path(root), "left"), _glob(Path(root), "right")
    kind = how.upper()
    if binned:
        source = f"""
            (SELECT *, ts // {WIDTH_MS} AS bin FROM read_parquet('{left}')) l
            {kind} JOIN (SELECT r0.*, b AS bin FROM read_parquet('{right}') r0,
                  unnest(range((r0.ts - {BOUND_MS}) // {WIDTH_MS},
                               (r0.ts + {BOUND_MS}) // {WIDTH_MS} + 1)) t(b)) r
              ON l.key = r.key AND l.bin = r.bin AND {CONDITION}"""
    else:
        source = f"read_parquet('{left}') l {kind} JOIN read_parquet('{right}') r ON {CONDITION}"
    select = (checksum_sql("l_id", "r_id") if check else
              "count(*), sum(l_id), sum(l_key), sum(l_ts), sum(amount), "
              "sum(r_id), sum(r_key), sum(r_ts), sum(qty)")
    con = duckdb.connect()
    try:
        row = con.execute(f"SELECT {select} FROM (SELECT {OUTPUT} FROM {source})").fetchone()
    finally:
        con.close()
    assert row is not None
    return (int(row[0]), int(row[1] or 0)) if check else int(row[0])


def polars_run(root: str, how: str, *, check: bool) -> Any:
    """One polars run of the binned join, as duckdb_run (module-level: a spawned child)."""
    import polars as pl

    from bench.checksum import pair_hash_polars

    left = pl.read_parquet(_glob(Path(root), "left")).with_columns(
        (pl.col("ts") // WIDTH_MS).alias("bin"))
    right = pl.read_parquet(_glob(Path(root), "right")).with_columns(
        pl.int_ranges((pl.col("ts") - BOUND_MS) // WIDTH_MS,
                      (pl.col("ts") + BOUND_MS) // WIDTH_MS + 1).alias("bin")).explode("bin")
    pairs = (left.join(right, on=["key", "bin"], how="inner", suffix="_r")
             .filter(pl.col("ts_r").is_between(pl.col("ts") - BOUND_MS, pl.col("ts") + BOUND_MS))
             .select(pl.col("id").alias("l_id"), pl.col("key").alias("l_key"),
                     pl.col("ts").alias("l_ts"), "amount", pl.col("id_r").alias("r_id"),
                     pl.col("key").alias("r_key"), pl.col("ts_r").alias("r_ts"), "qty"))
    if how == "left":
        alone = left.join(pairs.select(pl.col("l_id").alias("id")).unique(), on="id", how="anti")
        pairs = pl.concat([pairs, alone.select(
            pl.col("id").alias("l_id"), pl.col("key").alias("l_key"), pl.col("ts").alias("l_ts"),
            "amount", pl.lit(None, pl.Int64).alias("r_id"), pl.lit(None, pl.Int64).alias("r_key"),
            pl.lit(None, pl.Int64).alias("r_ts"), pl.lit(None, pl.Float64).alias("qty"))])
    if check:
        return pairs.height, int(pairs.select(pair_hash_polars("l_id", "r_id").sum()).item())
    pairs.select(pl.len(), pl.all().sum())
    return pairs.height


def _sides(spark: SparkSession, root: Path) -> tuple[DataFrame, DataFrame]:
    left = spark.read.schema("id long, key long, ts long, amount double").parquet(str(root / "left"))
    right = spark.read.schema("id long, key long, ts long, qty double").parquet(str(root / "right"))
    return left.alias("l"), right.alias("r")


def _in_range() -> Any:
    from pyspark.sql import functions as F

    return (F.col("l.key") == F.col("r.key")) & F.col("r.ts").between(
        F.col("l.ts") - BOUND_MS, F.col("l.ts") + BOUND_MS)


def spark_plain(spark: SparkSession, root: Path, how: str) -> DataFrame:
    left, right = _sides(spark, root)
    return left.join(right, _in_range(), how).selectExpr(*OUTPUT.split(", "))


def spark_binned(spark: SparkSession, root: Path, how: str) -> DataFrame:
    """What a Spark user writes by hand, as DuckDB binned: the left row in its bin, the right
    row in every bin its window reaches, equi-join on (key, bin), then the exact range."""
    from pyspark.sql import functions as F

    left, right = _sides(spark, root)
    left = left.withColumn("bin", F.expr(f"ts div {WIDTH_MS}")).alias("l")
    right = right.withColumn("bin", F.explode(F.sequence(
        F.expr(f"(ts - {BOUND_MS}) div {WIDTH_MS}"), F.expr(f"(ts + {BOUND_MS}) div {WIDTH_MS}")))
    ).alias("r")
    on = (F.col("l.bin") == F.col("r.bin")) & _in_range()
    return left.join(right, on, how).selectExpr(*OUTPUT.split(", "))


def ours(spark: SparkSession, root: Path, how: str, bin_ms: int | None = None) -> DataFrame:
    from joins.operators.interval_join.spark_batch import interval_join
    from joins.operators.interval_join.spec import IntervalJoinSpec

    left, right = _sides(spark, root)
    spec = IntervalJoinSpec.model_validate({
        "join": how, "condition": CONDITION, "left_columns": ["id", "key", "ts", "amount"],
        "right_columns": ["id", "key", "ts", "qty"]})
    return interval_join(left, right, spec, left_id="id", right_id="id", bin_ms=bin_ms).rows


def ours_projected(spark: SparkSession, root: Path, how: str) -> DataFrame:
    """Ours as a user who wants the peers' eight columns calls it: the join's rows without the
    lineage (`_l_seq`, `_r_seq`) and `_kind` columns, which Spark then neither shuffles nor
    writes."""
    return ours(spark, root, how).select(*PEER_COLUMNS)


def with_bin_widths(engines: list[str], widths: list[int]) -> list[str]:
    """`ours` again per width in `widths` (the time bins' width, ms), as engine `ours_bin<s>s`:
    how the bin width moves the join on each distribution, in one run with the peers."""
    extra = []
    for width in widths:
        name = f"ours_bin{width // 1000}s"
        BUILDERS[name] = functools.partial(ours, bin_ms=width)
        IDS[name] = IDS["ours"]
        extra.append(name)
    at = engines.index("ours") + 1 if "ours" in engines else len(engines)
    return [*engines[:at], *extra, *engines[at:]]


BUILDERS: dict[str, Callable[[SparkSession, Path, str], DataFrame]] = {
    "spark_plain": spark_plain, "spark_binned": spark_binned, "ours": ours,
    "ours_projected": ours_projected}
IDS = {"spark_plain": ("l_id", "r_id"), "spark_binned": ("l_id", "r_id"),
       "ours": ("_l_seq", "_r_seq"), "ours_projected": ("l_id", "r_id")}


def run_case(spark: SparkSession | None, root: Path, size: str, dist: str, how: str,
             engines: list[str], *, runs: int, warmup: int, timeout: float) -> list[Result]:
    results = []
    for engine in engines:
        res = Result(size=size, dist=dist, engine=engine, how=how)
        print(f"  {size} {dist} {how} {engine} ...", flush=True)
        try:
            if engine.startswith("duckdb"):
                child_engine(duckdb_run, (str(root), engine == "duckdb_binned", how), runs=runs,
                             warmup=warmup, timeout=timeout, res=res)
            elif engine == "polars_binned":
                child_engine(polars_run, (str(root), how), runs=runs, warmup=warmup,
                             timeout=timeout, res=res)
            else:
                assert spark is not None
                build = BUILDERS[engine]
                spark_engine(spark, lambda b=build: b(spark, root, how), IDS[engine], runs=runs,
                             warmup=warmup, timeout=timeout, res=res)
        except Exception as exc:
            res.status, res.note = "error", f"{type(exc).__name__}: {str(exc)[:300]}"
        res.finish()
        results.append(res)
        print(f"    {res.status} median={res.median_s} rows={res.rows} checksum={res.checksum} "
              f"{res.note}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Interval join benchmark (see module docstring).")
    parser.add_argument("--sizes", default="100k", help="rows per side, e.g. 100k,1m")
    parser.add_argument("--dists", default="uniform,skewed")
    parser.add_argument("--hows", default="inner,left")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--span-days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs per engine and case")
    parser.add_argument("--jvm-warmup-rounds", type=int, default=3)
    parser.add_argument("--jvm-warmup-rows", default="100k")
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--bin-ms", default="",
                        help="also run ours with these bin widths (ms, comma-separated); "
                             "default: the join's own (the window's width)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    widths = [w.strip() for w in args.bin_ms.split(",") if w.strip()]
    if not all(w.isdigit() and int(w) > 0 for w in widths):
        parser.error(f"--bin-ms: positive widths in milliseconds, comma-separated (got {args.bin_ms!r})")
    engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        parser.error(f"--engines: unknown {', '.join(unknown)} (known: {', '.join(ENGINES)})")
    engines = with_bin_widths(engines, [int(w) for w in widths])
    hows = [h for h in args.hows.split(",") if h]
    if set(hows) - {"inner", "left"}:
        # The binned peers replicate each right row into every bin its window reaches; an outer
        # right side would come out padded once per bin it did not match in.
        parser.error(f"--hows: inner and left only (got {args.hows}): the binned peers' right "
                     f"and full joins pad a right row once per bin its window reaches")
    spark = None
    spark_engines = [e for e in engines if e in BUILDERS]
    if spark_engines:
        from joins.spark import SparkSettings, get_spark
        from joins.spark.session import spark_conf_from_env

        # TJ_SPARK_CONF: a run measuring another setting (one read at the session's start).
        spark = get_spark(SparkSettings(shuffle_partitions=args.shuffle_partitions,
                                        driver_memory="8g", extra_conf=spark_conf_from_env()))
        small = generate(parse_count(args.jvm_warmup_rows), "uniform", args.span_days)
        print("warming up the JVM", flush=True)
        for _ in range(args.jvm_warmup_rounds):
            for engine in spark_engines:
                for how in hows:
                    BUILDERS[engine](spark, small, how).write.format("noop").mode("overwrite").save()
    machine_before = machine()
    results: list[Result] = []
    for size in args.sizes.split(","):
        for dist in args.dists.split(","):
            root = generate(parse_count(size), dist, args.span_days)
            for how in hows:
                results += run_case(spark, root, size, dist, how, engines, runs=args.runs,
                                    warmup=args.warmup, timeout=args.timeout)

    def summary() -> None:
        for res in results:
            peer = next((r for r in results if r.engine == "spark_binned" and r.median_s
                         and (r.size, r.dist, r.how) == (res.size, res.dist, res.how)), None)
            if res.engine.startswith("ours") and res.ratio_to_duckdb:
                vs_peer = f", {res.median_s / peer.median_s:.2f}x hand-written binned Spark" \
                    if peer and peer.median_s and res.median_s else ""
                print(f"{res.engine} {res.size} {res.dist} {res.how}: {res.ratio_to_duckdb:.2f}x "
                      f"DuckDB binned{vs_peer}")

    return report(results, reference="duckdb_binned", args=vars(args), out=args.out,
                  command="python -m bench.interval_join " + " ".join(sys.argv[1:] if argv is None else argv),
                  machine_before=machine_before, summary=summary,
                  extra={"condition": CONDITION, "reference": "duckdb_binned"})


if __name__ == "__main__":
    raise SystemExit(main())
