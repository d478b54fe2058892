"""Latency of one incremental interval-join micro-batch against the rows its buffers hold.

    .venv/bin/python -m bench.interval_step --buffered 10000,1000000 --batch 10000 --runs 3

Target (issue 12): a 10k-row micro-batch against 1M buffered rows costs at most 1.3x what it
costs against 10k. Per buffered size: a fresh pipeline-style join (two events tables, derived
watermarks, the left-first batch rule, `r.ts BETWEEN l.ts - 300000 AND l.ts + 300000 AND
l.key = r.key`, inner), a first batch that buffers `--buffered` rows (half per side, one day of
event time, an allowed lag of ten days so that nothing is evicted), one untimed warm-up batch,
then `--runs` timed batches of `--batch` new rows (half per side, keys from the same key space,
times just after the buffered ones). `run_microbatch` is timed end to end (lease, plan, every
Spark job, every commit, the done record); its phases are printed.

Before the first size, `--jvm-warmup-rounds` joins of batches of the measured size (10k
buffered, two batches each) run untimed, so that no size carries the process's JIT warm-up: a
batch of more than 1,000 rows a side takes another path than a small one (its rows cached, not
checkpointed), whose code a small warm-up would leave cold. Per size, the first batch after the
buffering one is reported apart as **cold** (its join's first read of the buffers and first
plans), the buffering batch itself as `load_s`; the median of the steady batches per size, the
cold batches and the ratio of the largest size to the smallest are saved to
bench/results/interval_step.json with the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import machine as _machine

RESULTS = Path(__file__).resolve().parent / "results" / "interval_step.json"
T0_MS = 1_700_000_000_000
DAY_MS = 86_400_000
KEYS = 100_000
LAG_MS = 10 * DAY_MS
CONDITION = "r.ts BETWEEN l.ts - 300000 AND l.ts + 300000 AND l.key = r.key"
TARGET = 1.3


class Join:
    def __init__(self, spark: Any, root: Path) -> None:
        from joins import lake
        from joins.operators.interval_join.columns import JoinLayout
        from joins.operators.interval_join.spark_incremental import IntervalJoinStep
        from joins.operators.interval_join.spec import IntervalJoinSpec

        self.spark, self.lake = spark, lake
        spec = IntervalJoinSpec.model_validate({
            "join": "inner", "condition": CONDITION, "left_columns": ["key", "ts", "amount"],
            "right_columns": ["key", "ts", "amount"]})
        inputs = {"key": "key", "ts": "ts", "amount": "amount"}
        layout = JoinLayout.of(spec, inputs={"left": inputs, "right": inputs})
        self.step = IntervalJoinStep(spec, layout, lag_ms={"left": LAG_MS, "right": LAG_MS},
                                     order="left_first")
        self.paths = {"left": str(root / "left"), "right": str(root / "right")}
        self.root = str(root / "join")
        self.seq = 0
        self.rng = np.random.default_rng(3)

    def land(self, rows: int, start_ms: int, span_ms: int) -> None:
        for side in ("left", "right"):
            n = rows // 2
            data = {"key": self.rng.integers(0, KEYS, n, dtype=np.int64),
                    "ts": start_ms + self.rng.integers(0, span_ms, n, dtype=np.int64),
                    "amount": np.round(self.rng.random(n) * 100, 2),
                    "_seq": np.arange(self.seq, self.seq + n, dtype=np.int64)}
            self.seq += n
            import pandas as pd

            frame = self.spark.createDataFrame(pd.DataFrame(data))
            self.lake.write_delta(frame, self.paths[side], mode="append")

    def run(self) -> Any:
        from joins.incremental import run_microbatch
        from joins.operators.interval_join.report import report_of

        return report_of(run_microbatch(self.spark, self.step, self.root, self.paths))


def measure(spark: Any, buffered: int, batch: int, runs: int, *, quiet: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tj-interval-step-") as tmp:
        join = Join(spark, Path(tmp))
        join.land(buffered, T0_MS, DAY_MS)
        started = time.perf_counter()
        first = join.run()
        load_s = time.perf_counter() - started
        assert sum(first.buffered_after.values()) == buffered, first.buffered_after
        times, phases = [], []
        cold_s, cold_phases = 0.0, {}
        clock = T0_MS + DAY_MS
        for n in range(runs + 1):
            join.land(batch, clock, 60_000)
            clock += 60_000
            started = time.perf_counter()
            report = join.run()
            elapsed = time.perf_counter() - started
            label = "cold" if n == 0 else f"#{n}"
            if not quiet:
                print(f"  buffered {buffered} {label}: {elapsed:.2f} s, {report.joined_rows} "
                      f"joined, buffers {report.buffered_after}", flush=True)
            if n == 0:
                cold_s, cold_phases = elapsed, report.timings
                continue
            times.append(elapsed)
            phases.append(report.timings)
        return {"buffered": buffered, "batch": batch, "load_s": round(load_s, 3),
                "cold_s": round(cold_s, 3), "cold_phases": cold_phases, "times_s": times,
                "median_s": statistics.median(times), "phases": phases[-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffered", default="10000,1000000")
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument("--jvm-warmup-rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from joins.spark import SparkSettings, get_spark

    spark = get_spark(SparkSettings(shuffle_partitions=args.shuffle_partitions, driver_memory="4g"))
    for _ in range(args.jvm_warmup_rounds):
        print("warming up the JVM (untimed)", flush=True)
        measure(spark, 10_000, args.batch, 2, quiet=True)
    before = _machine()
    results = [measure(spark, int(b), args.batch, args.runs) for b in args.buffered.split(",")]
    ratio = results[-1]["median_s"] / results[0]["median_s"]
    for r in results:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in r["phases"].items())
        print(f"buffered {r['buffered']:>9}: median {r['median_s']:.2f} s  ({phases}); "
              f"cold {r['cold_s']:.2f} s, buffering batch {r['load_s']:.2f} s")
    print(f"ratio {results[-1]['buffered']} / {results[0]['buffered']}: {ratio:.2f} "
          f"(target <= {TARGET})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine_before": before, "machine_after": _machine(),
                                    "args": {k: str(v) for k, v in vars(args).items()},
                                    "results": results, "ratio": ratio, "target": TARGET},
                                   indent=2) + "\n")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
