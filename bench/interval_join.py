"""Interval join benchmark (batch form): our Spark join against DuckDB (a plain range join and a
time-binned one) and a plain Spark range join, on the same Parquet data, ratios in one run.

    .venv/bin/python -m bench.interval_join --sizes 100k,1m --dists uniform,skewed --runs 3

The join: `l.key = r.key AND r.ts BETWEEN l.ts - 300000 AND l.ts + 300000` (± 300 s), inner,
between two event streams of N rows each (`bench/datagen.py`'s keys: uniform, or 3 keys holding
80 % of the rows; event times over `--span-days`). Every engine is timed end to end: read the
Parquet files, plan, run, materialize every output column (Spark: the `noop` sink; DuckDB: an
aggregate over every output column). Untimed JVM warm-up rounds come first. Medians of `--runs`
runs, ratios to DuckDB's binned join (`x binned`) and plain join (`x plain`) from the same
invocation, row counts checked across engines; saved to bench/results/interval_join.json with
the machine's load average before and after.

- `duckdb_plain`: the SQL as written (DuckDB's hash join on the key, the range as a filter: a
  hot key compares all its pairs);
- `duckdb_binned`: the same join on (key, time bin), the right side exploded into the bins its
  window reaches (what a careful user writes by hand);
- `spark_plain`: Spark's equi-join on the key plus the range filter;
- `ours`: `joins.operators.interval_join.spark_batch.interval_join` (keys plus time bins,
  `bins.py`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from bench.asof_join import (
    Result,
    Timeout,
    _machine,
    _spark_action,
    _timed,
    check_rows,
    print_table,
)
from bench.datagen import DATA_DIR, HOT_KEYS, T0_MS, _draw_keys, _write, parse_count

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RESULTS = Path(__file__).resolve().parent / "results" / "interval_join.json"
ENGINES = ("duckdb_plain", "duckdb_binned", "spark_plain", "ours")
BOUND_MS = 300_000
CONDITION = f"r.ts BETWEEN l.ts - {BOUND_MS} AND l.ts + {BOUND_MS} AND l.key = r.key"
ROWS_PER_KEY = 1000  # uniform: keys = rows / ROWS_PER_KEY


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


def duckdb_once(root: Path, binned: bool) -> int:
    import duckdb

    left, right = _glob(root, "left"), _glob(root, "right")
    width = 2 * BOUND_MS
    if binned:
        source = f"""
            (SELECT *, ts // {width} AS bin FROM read_parquet('{left}')) l
            JOIN (SELECT r0.*, b AS bin FROM read_parquet('{right}') r0,
                  unnest(range((r0.ts - {BOUND_MS}) // {width}, (r0.ts + {BOUND_MS}) // {width} + 1)) t(b)) r
              ON l.key = r.key AND l.bin = r.bin AND {CONDITION}"""
    else:
        source = f"read_parquet('{left}') l JOIN read_parquet('{right}') r ON {CONDITION}"
    con = duckdb.connect()
    try:
        row = con.execute(f"""SELECT count(*), sum(l.id), sum(l.key), sum(l.ts), sum(l.amount),
                                     sum(r.id), sum(r.key), sum(r.ts), sum(r.qty)
                              FROM {source}""").fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0])


def _duck_worker(root: str, binned: bool, runs: int, warmup: int, queue: Any) -> None:
    queue.put(_timed(lambda: duckdb_once(Path(root), binned), runs, warmup))


def duckdb_timed(root: Path, binned: bool, runs: int, warmup: int,
                 timeout: float) -> tuple[list[float], int]:
    """DuckDB's runs in a child process, ended when they exceed `timeout` per run (a plain join
    on a hot key may never finish, and a thread cannot be stopped)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_duck_worker, args=(str(root), binned, runs, warmup, queue))
    proc.start()
    try:
        return queue.get(timeout=timeout * (runs + warmup))  # type: ignore[no-any-return]
    except Exception:
        raise Timeout(f"over {timeout:.0f} s a run") from None
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()


def _sides(spark: SparkSession, root: Path) -> tuple[DataFrame, DataFrame]:
    left = spark.read.schema("id long, key long, ts long, amount double").parquet(str(root / "left"))
    right = spark.read.schema("id long, key long, ts long, qty double").parquet(str(root / "right"))
    return left, right


def spark_plain(spark: SparkSession, root: Path) -> DataFrame:
    from pyspark.sql import functions as F

    left, right = _sides(spark, root)
    return left.alias("l").join(right.alias("r"), (F.col("l.key") == F.col("r.key"))
                  & F.col("r.ts").between(F.col("l.ts") - BOUND_MS, F.col("l.ts") + BOUND_MS))


def ours(spark: SparkSession, root: Path) -> DataFrame:
    from joins.operators.interval_join.spark_batch import interval_join
    from joins.operators.interval_join.spec import IntervalJoinSpec

    left, right = _sides(spark, root)
    spec = IntervalJoinSpec.model_validate({
        "join": "inner", "condition": CONDITION, "left_columns": ["id", "key", "ts", "amount"],
        "right_columns": ["id", "key", "ts", "qty"]})
    return interval_join(left, right, spec, left_id="id", right_id="id").rows


def _spark(spark: SparkSession, build: Any, runs: int, warmup: int, timeout: float,
           res: Result) -> None:
    try:
        res.rows = int(_spark_action(spark, lambda: build().count(), timeout))

        def once() -> int:
            _spark_action(spark, lambda: build().write.format("noop").mode("overwrite").save(),
                          timeout)
            return res.rows or 0
        res.times_s, _ = _timed(once, runs, warmup)
    except Timeout as exc:
        res.status, res.note = "timeout", str(exc)


def run_case(spark: SparkSession, root: Path, size: str, dist: str, engines: list[str], *,
             runs: int, warmup: int, timeout: float) -> list[Result]:
    results = []
    for engine in engines:
        res = Result(size=size, dist=dist, engine=engine)
        print(f"  {size} {dist} {engine} ...", flush=True)
        try:
            if engine.startswith("duckdb"):
                binned = engine == "duckdb_binned"
                try:
                    res.times_s, res.rows = duckdb_timed(root, binned, runs,
                                                         warmup if binned else 0, timeout)
                except Timeout as exc:
                    res.status, res.note = "timeout", str(exc)
            elif engine == "spark_plain":
                _spark(spark, lambda: spark_plain(spark, root), runs, 0, timeout, res)
            else:
                _spark(spark, lambda: ours(spark, root), runs, warmup, timeout, res)
        except Exception as exc:
            res.status, res.note = "error", f"{type(exc).__name__}: {str(exc)[:300]}"
        if res.times_s:
            res.median_s = statistics.median(res.times_s)
        results.append(res)
        print(f"    {res.status} median={res.median_s} rows={res.rows} {res.note}", flush=True)
    return results


def ratios(results: list[Result]) -> list[dict[str, Any]]:
    out = []
    for res in results:
        group = {r.engine: r for r in results if (r.size, r.dist) == (res.size, res.dist)}
        row = asdict(res)
        for name, engine in (("x_binned", "duckdb_binned"), ("x_plain", "duckdb_plain")):
            base = group.get(engine)
            row[name] = (res.median_s / base.median_s if res.median_s and base is not None
                         and base.median_s else None)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Interval join benchmark (see module docstring).")
    parser.add_argument("--sizes", default="100k", help="rows per side, e.g. 100k,1m")
    parser.add_argument("--dists", default="uniform,skewed")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--span-days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--jvm-warmup-rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    from joins.spark import SparkSettings, get_spark

    spark = get_spark(SparkSettings(shuffle_partitions=args.shuffle_partitions, driver_memory="8g"))
    small = generate(100_000, "uniform", args.span_days)
    print("warming up the JVM", flush=True)
    for _ in range(args.jvm_warmup_rounds):
        for build in (spark_plain, ours):
            build(spark, small).write.format("noop").mode("overwrite").save()
    machine_before = _machine()
    results: list[Result] = []
    for size in args.sizes.split(","):
        for dist in args.dists.split(","):
            root = generate(parse_count(size), dist, args.span_days)
            results += run_case(spark, root, size, dist, engines, runs=args.runs,
                                warmup=args.warmup, timeout=args.timeout)
    rows = ratios(results)
    print()
    print_table(results)
    print()
    for row in rows:
        if row["engine"] == "ours":
            print(f"ours {row['size']} {row['dist']}: {row['x_binned'] or float('nan'):.2f}x DuckDB "
                  f"binned, {row['x_plain'] or float('nan'):.2f}x DuckDB plain")
    problems = check_rows(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine_before": machine_before, "machine_after": _machine(),
        "args": {k: str(v) for k, v in vars(args).items()}, "condition": CONDITION,
        "results": rows, "row_count_problems": problems}, indent=2) + "\n")
    print(f"\nsaved {args.out}")
    for problem in problems:
        print(f"ROW COUNT MISMATCH: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
