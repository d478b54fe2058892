"""What the suite's micro-batches cost: scenario replays through the Spark runtime, timed.

    .venv/bin/python -m bench.replays                                  # four operators, one record a batch
    .venv/bin/python -m bench.replays 004_lhs_steps_inner --calls      # where a batch's driver time goes
    .venv/bin/python -m bench.replays --budget                         # who spends a round's CPU
    .venv/bin/python -m bench.replays --frames                         # who builds the frames (Dataset calls)
    .venv/bin/python -m bench.replays --conf spark.sql.autoBroadcastJoinThreshold=-1
    .venv/bin/python -m bench.replays --env TJ_SOME_SWITCH=1 --rounds 6

The scenario, crash and replay tests spend most of the suite's time in micro-batches of a few
records, and so does a user's sensor on a quiet stream (docs/testing.md, "What is left"). This
replays shipped scenarios (`tests/scenarios/`) on a session with the suite's own settings (its
Spark settings, the session JVM's options, two shuffle partitions: `tests/conftest.py`), each
replay checked against the reference engine, so that a faster variant that changes a result
fails instead of being reported.

Untimed warm-up rounds first (a session's first replays pay for the JIT's warm-up, which is not
the batch's cost), then `--rounds` timed rounds of every scenario. With `--conf` (a Spark SQL
runtime setting) or `--env` (an environment variable the engine reads when it builds a batch),
rounds alternate between the base and the variant in one process, the order switched each round,
so that the machine's drift, which moves a run more than most changes do, cancels out of the
ratio. `--calls` adds one round that counts, per batch, the Spark jobs and the py4j calls by JVM
method and their wall time (the Dataset calls Catalyst analyses one by one, the writes' `stage`,
`localCheckpoint`); calls made by the writes' threads overlap. `--frames` adds one round that
counts the Dataset calls (each analysed when made) by the engine function that made them
(bench/dataset_calls.py): where a step built as one plan would start. `--budget` reads, around every
timed round, the CPU of the driver's Python and of its JVM by thread role, JIT and collector
(bench/cpu_budget.py), reported as medians per arm.
Results go to bench/results/replays.json with the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import cpu_budget, dataset_calls
from bench.harness import machine

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RESULTS = Path(__file__).resolve().parent / "results" / "replays.json"
# One scenario of each operator the scenario tests replay most (docs/testing.md measures these).
DEFAULT = ("003_join_full", "004_lhs_steps_inner", "001_grace_buffer_example",
           "000_table_table_outer_join_versioned")


@dataclass(frozen=True)
class Case:
    name: str
    batch_size: int | None
    replay: Callable[[], None]
    batches: int


def suite_session() -> SparkSession:
    """A session as a test worker's (tests/conftest.py); JVM options of the caller's own
    (JDK_JAVA_OPTIONS) win, as they do in the suite."""
    given = os.environ.get("JDK_JAVA_OPTIONS")
    from tests import conftest

    os.environ["JDK_JAVA_OPTIONS"] = given or conftest.SESSION_JVM_OPTIONS
    from joins.spark import get_spark

    return get_spark(conftest.suite_settings())


def case(name: str, batch_size: int | None) -> Case:
    import importlib

    from joins.microbatch import run_reference
    from joins.scenario import load_scenario
    from joins.scenario.runner import prepare
    from tests.spark.operator_helpers import SCENARIOS

    path = SCENARIOS / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"no scenario {name!r} in {SCENARIOS} (a file name without .json)")
    definition, spec, records = prepare(load_scenario(path))
    if definition.spark_replay is None:
        raise SystemExit(f"{name}: operator {definition.name!r} has no Spark engine")
    module, func = definition.spark_replay.split(":")
    spark_replay = getattr(importlib.import_module(module), func)
    want = run_reference(definition, spec, records, batch_size or len(records), {})

    def replay() -> None:
        got = spark_replay(spec, records, batch_size, {})
        if got != want:
            raise SystemExit(f"{name} at batch size {batch_size}: the Spark engine's items differ "
                             "from the reference engine's; a variant must not change results")

    size = batch_size or len(records)
    return Case(name, batch_size, replay, -(-len(records) // size))


@contextmanager
def variant(spark: SparkSession, conf: dict[str, str], env: dict[str, str]) -> Iterator[None]:
    """The variant's settings for the duration, the base's restored after."""
    saved_conf = {k: spark.conf.get(k, None) for k in conf}
    saved_env = {k: os.environ.get(k) for k in env}
    for k, v in conf.items():
        spark.conf.set(k, v)
    os.environ.update(env)
    try:
        yield
    finally:
        for k, old in saved_conf.items():
            spark.conf.unset(k) if old is None else spark.conf.set(k, old)
        for k, old_env in saved_env.items():
            os.environ.pop(k, None) if old_env is None else os.environ.__setitem__(k, old_env)


def timed_round(cases: list[Case]) -> dict[str, float]:
    out = {}
    for c in cases:
        start = time.perf_counter()
        c.replay()
        out[c.name] = time.perf_counter() - start
    return out


def counted_round(spark: SparkSession, cases: list[Case]) -> dict[str, Any]:
    """Per scenario: Spark jobs and py4j calls (count, wall ms) per batch, by JVM method."""
    import py4j.java_gateway as gateway

    original = gateway.JavaMember.__call__
    calls: Counter[str] = Counter()
    wall: Counter[str] = Counter()

    def counting(self: Any, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, *args)
        finally:
            calls[self.name] += 1
            wall[self.name] += time.perf_counter() - start

    scheduler = spark.sparkContext._jsc.sc().dagScheduler()  # type: ignore[union-attr]
    out: dict[str, Any] = {}
    for c in cases:
        calls.clear()
        wall.clear()
        jobs_before = scheduler.numTotalJobs()
        gateway.JavaMember.__call__ = counting  # type: ignore[method-assign]
        try:
            c.replay()
        finally:
            gateway.JavaMember.__call__ = original  # type: ignore[method-assign]
        jobs = scheduler.numTotalJobs() - jobs_before
        out[c.name] = {"batches": c.batches, "jobs_per_batch": round(jobs / c.batches, 2),
                       "py4j_calls_per_batch": round(sum(calls.values()) / c.batches, 1),
                       "by_method": [{"method": m, "calls_per_batch": round(calls[m] / c.batches, 1),
                                      "ms_per_batch": round(wall[m] * 1000 / c.batches, 1)}
                                     for m, _ in wall.most_common(12)]}
    return out


def frames_round(cases: list[Case], top: int = 25) -> dict[str, Any]:
    """One round of every case: Dataset calls a batch by the engine function that made them."""
    batches = sum(c.batches for c in cases)
    with dataset_calls.counting() as tally:
        wall = sum(timed_round(cases).values())
    return {"batches": batches, "ms_per_batch": round(wall * 1000 / batches, 1),
            **{f"dataset_{k}_per_batch": v for k, v in tally.totals(per=batches).items()},
            "by_function": tally.by_function(top, per=batches)}


def pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{what} takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="?", default=",".join(DEFAULT),
                        help="comma-separated names of files in tests/scenarios/, without .json")
    parser.add_argument("--batch-size", default="1", help="records a batch, or 'all'")
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds (of each arm)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--calls", action="store_true", help="count jobs and py4j calls a batch")
    parser.add_argument("--frames", action="store_true",
                        help="count Dataset calls a batch by the engine function that made them")
    parser.add_argument("--budget", action="store_true",
                        help="where each round's CPU goes (bench/cpu_budget.py)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    conf, env = pairs(args.conf, "--conf"), pairs(args.env, "--env")
    size = None if args.batch_size == "all" else int(args.batch_size)

    before = machine()
    spark = suite_session()
    cases = [case(n.strip(), size) for n in args.scenarios.split(",") if n.strip()]
    arms = ["base", "variant"] if conf or env else ["base"]

    def in_arm(arm: str) -> Any:
        return variant(spark, conf, env) if arm == "variant" else variant(spark, {}, {})

    for i in range(args.warmup):
        print(f"warm-up round {i + 1} of {args.warmup} (untimed)", flush=True)
        for arm in arms:
            with in_arm(arm):
                timed_round(cases)
    rounds: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    budgets: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    for i in range(args.rounds):
        for arm in arms if i % 2 == 0 else arms[::-1]:
            with in_arm(arm):
                start = cpu_budget.read(spark) if args.budget else None
                result = timed_round(cases)
                if start is not None:
                    budgets[arm].append(cpu_budget.budget(spark, start))
            rounds[arm].append(result)
            print(f"round {i + 1} {arm}: {sum(result.values()):.2f} s", flush=True)
    summary = {arm: summarize(rs, cases) | medians(budgets[arm]) for arm, rs in rounds.items()}
    for c in cases:
        line = "  ".join(f"{arm} {summary[arm]['ms_per_batch'][c.name]:.0f} ms"
                         for arm in arms)
        print(f"{c.name} ({c.batches} batches of {args.batch_size}): {line} a batch (median)")
    for arm in arms:
        s = summary[arm]
        print(f"{arm}: all scenarios {s['median_s']:.2f} s a round (median; rounds "
              f"{', '.join(f'{t:.2f}' for t in s['rounds_s'])})")
        if "cpu_budget" in s:
            print(f"{arm}: CPU seconds a round (median of each part):")
            print("\n".join(cpu_budget.lines(s["cpu_budget"])))
    if len(arms) == 2:
        ratio = summary["variant"]["median_s"] / summary["base"]["median_s"]
        print(f"variant / base: {ratio:.3f} ({conf or ''}{env or ''})")
    counted = counted_round(spark, cases) if args.calls else None
    for name, c in (counted or {}).items():
        print(f"{name}: {c['jobs_per_batch']} Spark jobs and {c['py4j_calls_per_batch']} py4j "
              "calls a batch; by method (calls, ms a batch):")
        for m in c["by_method"]:
            print(f"    {m['method']:<20} {m['calls_per_batch']:7.1f} {m['ms_per_batch']:8.1f}")
    frames = frames_round(cases) if args.frames else None
    if frames is not None:
        print(f"Dataset calls: {frames['dataset_calls_per_batch']} a batch, "
              f"{frames['dataset_ms_per_batch']:.0f} of its {frames['ms_per_batch']:.0f} ms "
              f"(over {frames['batches']} batches); by engine function (calls, ms a batch):")
        for f in frames["by_function"]:
            print(f"    {f['function']:<62} {f['calls']:6.1f} {f['ms']:7.1f}  {f['methods']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine_before": before, "machine_after": machine(),
        "args": {k: str(v) for k, v in vars(args).items()}, "summary": summary,
        "calls": counted, "frames": frames}, indent=2) + "\n")
    print(f"saved {args.out}")
    return 0


def medians(budgets: list[dict[str, float]]) -> dict[str, Any]:
    if not budgets:
        return {}
    return {"cpu_budget": {k: round(statistics.median(b[k] for b in budgets), 3)
                           for k in budgets[0]}}


def summarize(rounds: list[dict[str, float]], cases: list[Case]) -> dict[str, Any]:
    totals = [sum(r.values()) for r in rounds]
    return {"rounds_s": [round(t, 3) for t in totals], "median_s": statistics.median(totals),
            "ms_per_batch": {c.name: statistics.median(r[c.name] for r in rounds) * 1000 / c.batches
                             for c in cases}}


if __name__ == "__main__":
    raise SystemExit(main())
