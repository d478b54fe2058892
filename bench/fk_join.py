"""Cost of one incremental foreign-key join micro-batch against the size of the tables, and
against a full recompute with a plain Spark join, in one run.

    .venv/bin/python -m bench.fk_join --sizes 1000000:100000,10000000:1000000 --runs 3

Per size `L:R` (L orders, R customers): two changelog Delta tables are generated (orders keyed
by `order_id` with the foreign key `customer_id` and an `amount`; customers keyed by
`customer_id` with a `name`). The first `--right-updates` customers (the hot ones) have
`--fanout` orders each (the rest spread over the other customers), whatever the size. One
untimed micro-batch loads both tables (the initial load builds the join's state), then per
run two timed micro-batches:

- `left`: `--left-updates` updates of random existing orders (a third move to another
  customer, the others change their amount);
- `right`: one update of each hot customer, each fanning out to its `--fanout` orders
  (`--right-updates` x `--fanout` subscribers answered: 1k x 100 = 100k by default).

The reference, timed in the same run on the same tables: a full recompute with a plain Spark
join (latest row per key of both changelogs, joined by foreign key, written to Delta), what a
job without incremental state would run after every batch. After every run the micro-batches'
current results (folded from the join's output changelog alone: per order its last row, unless a
tombstone) must equal the recompute's rows by count and a checksum over every column, or the
benchmark stops. Printed and saved to
bench/results/fk_join.json: medians, the ratio of each micro-batch to the full recompute, and
the ratio of the largest size to the smallest (target: at most 1.3, cost flat in table size).
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
RESULTS = Path(__file__).resolve().parent / "results" / "fk_join.json"
T0_MS = 1_700_000_000_000
TARGET_RATIO = 1.3


@dataclass
class SizeResult:
    left_rows: int
    right_rows: int
    load_s: float = 0.0
    left_s: list[float] = field(default_factory=list)
    right_s: list[float] = field(default_factory=list)
    full_s: list[float] = field(default_factory=list)
    medians: dict[str, float] = field(default_factory=dict)
    fan_out: list[int] = field(default_factory=list)
    rows_out: dict[str, list[int]] = field(default_factory=dict)
    phases_s: dict[str, dict[str, float]] = field(default_factory=dict)
    ratio_to_full: dict[str, float] = field(default_factory=dict)
    ratio_to_smallest: dict[str, float] = field(default_factory=dict)


def columns() -> Any:
    from joins.changelog import ChangelogColumns
    from joins.operators.fk_join.columns import FkColumns

    return FkColumns(left=ChangelogColumns(key="order_id"), right=ChangelogColumns(key="customer_id"),
                     left_values=("customer_id", "amount"), right_values=("name",),
                     foreign_key="customer_id")


def spec() -> Any:
    from joins.operators.fk_join.spec import FkJoinSpec

    return FkJoinSpec.model_validate({"join": "left", "foreign_key": "customer_id",
                                      "left": {"versioned": False}, "right": {"versioned": False}})


@dataclass(frozen=True)
class Shape:
    """The first `hot` customers have `fanout` orders each; the others share the rest."""

    customers: int
    hot: int
    fanout: int

    def customer_of(self, order: Any) -> Any:
        from pyspark.sql import functions as F

        spread = F.lit(self.hot) + (order * 2654435761) % F.lit(self.customers - self.hot)
        return F.when(order < self.hot * self.fanout, (order / self.fanout).cast("long")) \
            .otherwise(spread)


def _orders(ids: DataFrame, shape: Shape, *, moved: bool, ts: Any) -> DataFrame:
    from pyspark.sql import functions as F

    order = F.col("order")
    customer = shape.customer_of(order)
    if moved:  # a third of the updates move the order to another (non-hot) customer
        other = F.lit(shape.hot) + (order * 40503 + F.col("id")) % F.lit(shape.customers - shape.hot)
        customer = F.when(F.col("id") % 3 == 0, other).otherwise(customer)
    return ids.select(order.cast("long").alias("order_id"), customer.cast("long").alias("customer_id"),
                      ((F.col("id") % 1000) / 10).cast("double").alias("amount"),
                      ts.cast("long").alias("ts"), F.lit(False).alias("tombstone"),
                      F.col("id").cast("long").alias("_seq"))


def generate(spark: SparkSession, root: Path, left: int, shape: Shape) -> None:
    """The initial orders and customers changelogs under `root` (once per size and shape)."""
    from pyspark.sql import functions as F

    from joins.lake import write_delta

    if (root / "_SUCCESS").exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    right = shape.customers
    ids = spark.range(left).withColumn("order", F.col("id"))
    write_delta(_orders(ids, shape, moved=False, ts=F.lit(T0_MS) + F.col("id")),
                str(root / "orders"), mode="append")
    customers = spark.range(right).select(
        F.col("id").alias("customer_id"), F.concat(F.lit("customer "), F.col("id")).alias("name"),
        (F.lit(T0_MS) + F.col("id")).alias("ts"), F.lit(False).alias("tombstone"),
        F.col("id").alias("_seq"))
    write_delta(customers, str(root / "customers"), mode="append")
    (root / "_SUCCESS").write_text("")


def full_recompute(spark: SparkSession, orders: str, customers: str, out: str) -> float:
    """The plain Spark join a job without incremental state runs: latest row per key of both
    changelogs, joined by foreign key, written to Delta."""
    from pyspark.sql import functions as F

    from joins.lake import read_delta, write_delta

    started = time.perf_counter()

    def latest(path: str, key: str, values: list[str]) -> DataFrame:
        body = F.struct(F.col("tombstone"), *(F.col(v) for v in values))
        return (read_delta(spark, path).groupBy(key).agg(F.max_by(body, F.col("_seq")).alias("w"))
                .where(~F.col("w.tombstone")).select(key, *(F.col(f"w.{v}").alias(v) for v in values)))

    o = latest(orders, "order_id", ["customer_id", "amount"])
    c = latest(customers, "customer_id", ["name"])
    write_delta(o.join(c, "customer_id", "left"), out, mode="overwrite")
    return time.perf_counter() - started


RESULT = ("order_id", "customer_id", "amount", "name")


def fingerprint(rows: DataFrame) -> tuple[int, int]:
    """(rows, a checksum over every column of RESULT): equal for equal sets of rows."""
    from pyspark.sql import functions as F

    row = rows.agg(F.count("*").alias("n"),
                   F.sum(F.xxhash64(*(F.col(c) for c in RESULT)).cast("decimal(38,0)")).alias("h")
                   ).first()
    assert row is not None
    return int(row["n"]), int(row["h"] or 0)


def current_output(spark: SparkSession, root: str) -> DataFrame:
    """The join's current results folded from its output changelog alone (not its state): per
    order the row emitted last, unless it is a tombstone."""
    from pyspark.sql import functions as F

    from joins.lake import read_delta
    from joins.operators.fk_join.columns import BATCH_ID, EMIT_SEQ, TOMBSTONE

    body = F.struct(F.col(TOMBSTONE), F.col("left_customer_id"), F.col("left_amount"),
                    F.col("right_name"))
    return (read_delta(spark, f"{root}/output").groupBy("order_id")
            .agg(F.max_by(body, F.struct(F.col(BATCH_ID), F.col(EMIT_SEQ))).alias("w"))
            .where(~F.col(f"w.{TOMBSTONE}"))
            .select("order_id", F.col("w.left_customer_id").alias("customer_id"),
                    F.col("w.left_amount").alias("amount"), F.col("w.right_name").alias("name")))


def run_size(spark: SparkSession, left: int, right: int, *, runs: int, left_updates: int,
             right_updates: int, fanout: int, workdir: Path) -> SizeResult:
    from pyspark.sql import functions as F

    from joins.lake import read_delta, write_delta
    from joins.operators.fk_join.spark_incremental import run_microbatch

    shape = Shape(right, right_updates, fanout)
    source = DATA / f"fk_{left}_{right}_{right_updates}x{fanout}"
    generate(spark, source, left, shape)
    run_dir = Path(tempfile.mkdtemp(prefix=f"fk-{left}-", dir=workdir))
    for name in ("orders", "customers"):
        shutil.copytree(source / name, run_dir / name)
    orders, customers = str(run_dir / "orders"), str(run_dir / "customers")
    root = str(run_dir / "join")
    result = SizeResult(left, right)

    def batch() -> tuple[float, Any]:
        started = time.perf_counter()
        report = run_microbatch(spark, spec(), root, left_source=orders, right_source=customers,
                                columns=columns())
        return time.perf_counter() - started, report

    result.load_s, loaded = batch()
    print(f"{left:>11,} x {right:>9,}: initial load {result.load_s:.1f} s "
          f"({loaded.rows_out:,} rows out)", flush=True)
    seq_left, seq_right, t = left, right, T0_MS + left + right
    for n in range(runs + 1):
        ids = spark.range(seq_left, seq_left + left_updates).withColumn(
            "order", (F.col("id") * 7919) % F.lit(left))
        write_delta(_orders(ids, shape, moved=True, ts=F.lit(t) + F.col("id")), orders,
                    mode="append")
        seq_left += left_updates
        left_s, lrep = batch()
        hot = spark.range(seq_right, seq_right + right_updates).select(
            (F.col("id") - seq_right).alias("customer_id"),
            F.concat(F.lit("renamed "), F.col("id")).alias("name"),
            (F.lit(t) + F.col("id")).alias("ts"), F.lit(False).alias("tombstone"),
            F.col("id").alias("_seq"))
        write_delta(hot, customers, mode="append")
        seq_right += right_updates
        t += 10 * (left_updates + right_updates)
        right_s, rrep = batch()
        full_s = full_recompute(spark, orders, customers, str(run_dir / "full"))
        # Untimed: the micro-batches' results, folded from their output, are the recompute's.
        ours = fingerprint(current_output(spark, root))
        full = fingerprint(read_delta(spark, str(run_dir / "full")))
        if ours != full:
            raise AssertionError(f"the micro-batches' results differ from the full recompute: "
                                 f"{ours[0]:,} rows (checksum {ours[1]}) against {full[0]:,} ({full[1]})")
        print(f"{left:>11,} x {right:>9,} #{n}: left {left_s:6.2f} s ({lrep.rows_out:,} out)  "
              f"right {right_s:6.2f} s (fan-out {rrep.fan_out:,}, {rrep.rows_out:,} out)  "
              f"full recompute {full_s:6.2f} s; results equal ({full[0]:,} rows, checksum {full[1]})",
              flush=True)
        if n == 0:
            continue  # warm-up
        result.left_s.append(round(left_s, 3))
        result.right_s.append(round(right_s, 3))
        result.full_s.append(round(full_s, 3))
        result.fan_out.append(rrep.fan_out)
        result.rows_out.setdefault("left", []).append(lrep.rows_out)
        result.rows_out.setdefault("right", []).append(rrep.rows_out)
        for kind, rep in (("left", lrep), ("right", rrep)):
            for phase, secs in rep.timings.items():
                result.phases_s.setdefault(kind, {}).setdefault(phase, 0.0)
                result.phases_s[kind][phase] += secs / runs
    result.medians = {k: statistics.median(v) for k, v in
                      (("left", result.left_s), ("right", result.right_s), ("full", result.full_s))}
    result.ratio_to_full = {k: round(result.medians[k] / result.medians["full"], 3)
                            for k in ("left", "right")}
    result.phases_s = {k: {p: round(s, 3) for p, s in v.items()} for k, v in result.phases_s.items()}
    shutil.rmtree(run_dir, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fk_join", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000:100000,10000000:1000000",
                        help="comma-separated ORDERS:CUSTOMERS table sizes")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per size (after a warm-up)")
    parser.add_argument("--left-updates", type=int, default=10_000)
    parser.add_argument("--right-updates", type=int, default=1_000,
                        help="hot customers, each updated once per right batch")
    parser.add_argument("--fanout", type=int, default=100, help="orders per hot customer")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results are saved")
    args = parser.parse_args(argv)
    sizes = [tuple(int(x.replace("_", "")) for x in s.split(":")) for s in args.sizes.split(",") if s]

    from joins.spark import get_spark

    spark = get_spark()
    load_before = os.getloadavg()
    DATA.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="fk-join-", dir=DATA))
    try:
        results = [run_size(spark, left, right, runs=args.runs, left_updates=args.left_updates,
                            right_updates=args.right_updates, fanout=args.fanout,
                            workdir=workdir)
                   for left, right in sizes]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    smallest = results[0]
    print(f"\n{'orders':>11} {'customers':>10} {'left s':>8} {'right s':>8} {'full s':>8} "
          f"{'left/full':>9} {'right/full':>10} {'left/smallest':>13} {'right/smallest':>14}")
    for r in results:
        r.ratio_to_smallest = {k: round(r.medians[k] / smallest.medians[k], 3)
                               for k in ("left", "right", "full")}
        print(f"{r.left_rows:>11,} {r.right_rows:>10,} {r.medians['left']:>8.2f} "
              f"{r.medians['right']:>8.2f} {r.medians['full']:>8.2f} {r.ratio_to_full['left']:>9.3f} "
              f"{r.ratio_to_full['right']:>10.3f} {r.ratio_to_smallest['left']:>13.3f} "
              f"{r.ratio_to_smallest['right']:>14.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": "python -m bench.fk_join " + " ".join(sys.argv[1:] if argv is None else argv),
        "runs": args.runs, "left_updates": args.left_updates, "right_updates": args.right_updates,
        "orders_per_hot_customer": args.fanout,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "targets": {"largest_over_smallest": TARGET_RATIO},
        "results": [asdict(r) for r in results],
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
