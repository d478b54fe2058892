"""`bench.replays`, the suite's micro-batch cost: a variant that changes a replay's items fails
rather than being timed, the variant's settings are undone after each round, and bad arguments
are refused by name."""

from __future__ import annotations

import os
from typing import Any

import pytest

from bench import replays

pytestmark = pytest.mark.spark

SMALL = "004_stale_hash_record_at_a_time"   # three records


def test_a_replay_that_differs_from_the_reference_fails(spark: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import joins.microbatch

    replays.case(SMALL, None).replay()            # agrees: no exit
    monkeypatch.setattr(joins.microbatch, "run_reference", lambda *_a, **_k: [])
    with pytest.raises(SystemExit, match=f"{SMALL} at batch size None: .* differ"):
        replays.case(SMALL, None).replay()


def test_a_variant_is_undone_after_its_round(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TJ_BENCH_REPLAYS_PROBE", raising=False)
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    with replays.variant(spark, {key: "7"}, {"TJ_BENCH_REPLAYS_PROBE": "1"}):
        assert spark.conf.get(key) == "7"
        assert os.environ["TJ_BENCH_REPLAYS_PROBE"] == "1"
    assert spark.conf.get(key) == before
    assert "TJ_BENCH_REPLAYS_PROBE" not in os.environ


def test_bad_arguments_are_named() -> None:
    with pytest.raises(SystemExit, match="no scenario 'nope'"):
        replays.case("nope", 1)
    with pytest.raises(SystemExit, match=r"--conf takes KEY=VALUE, got 'spark\.x'"):
        replays.pairs(["spark.x"], "--conf")
    assert replays.pairs(["a=1", "b=x=y"], "--env") == {"a": "1", "b": "x=y"}


def test_the_cpu_budget_splits_a_rounds_cpu_by_part(spark: Any) -> None:
    from bench import cpu_budget

    start = cpu_budget.read(spark)
    assert spark.range(50_000).selectExpr("sum(id * 2)").collect()[0][0] == 2 * sum(range(50_000))
    parts = cpu_budget.budget(spark, start)
    assert parts["wall"] > 0 and parts["python"] >= 0
    # The query was analysed and optimized by Catalyst, on the py4j thread serving this call.
    assert parts["rules: analysis"] > 0 and parts["rules: optimizer"] > 0
    assert parts["py4j"] > 0
    if "jvm" in parts:   # Linux: the JVM's whole CPU is read from /proc, and covers its parts
        assert parts["jvm"] >= parts["py4j"] + parts["tasks"] - 0.05
    assert any("rules: analysis" in line for line in cpu_budget.lines(parts))


def test_rule_times_and_thread_roles_are_read_by_name() -> None:
    from bench import cpu_budget

    dump = """=== Metrics of Analyzer/Optimizer Rules ===
Total number of runs: 3
Total time: 0.6 seconds

Rule                                      Effective Time / Total Time      Effective Runs / Total Runs
org.apache.spark.sql.catalyst.analysis.Analyzer$ResolveReferences    100 / 200000000    1 / 2
org.apache.spark.sql.catalyst.optimizer.ColumnPruning                0 / 300000000      0 / 1
org.apache.spark.sql.delta.stats.PrepareDeltaScan                    0 / 100000000      0 / 1
"""
    assert cpu_budget.rule_seconds(dump) == {
        "rules: analysis": 0.2, "rules: optimizer": 0.3, "rules: other": 0.1}
    assert cpu_budget.role("Thread-4") == "py4j"
    assert cpu_budget.role("Executor task launch worker for task 1.0") == "tasks"
    assert cpu_budget.role("dag-scheduler-event-loop") == "scheduler"
    assert cpu_budget.role("task-result-getter-0") == "other threads"


def test_dataset_calls_are_tallied_by_the_engine_function_that_made_them(spark: Any) -> None:
    from pyspark.sql.classic.dataframe import DataFrame

    from bench import dataset_calls
    from joins.spark.frames import for_writing

    original = DataFrame.__dict__["coalesce"]
    df = spark.range(4)
    with dataset_calls.counting() as tally:
        for_writing(df)
        for_writing(df)
        df.where("id > 1")          # the test's own call: outside the engine
    assert DataFrame.__dict__["coalesce"] is original   # undone on leaving
    rows = {r["function"]: r for r in tally.by_function(top=5)}
    assert rows["joins/spark/frames.py:for_writing"]["calls"] == 2
    assert rows["joins/spark/frames.py:for_writing"]["methods"] == "coalesce 2.0"
    # `where` calls `filter` inside it: one call, counted as the outer one.
    assert rows[dataset_calls.OTHER]["methods"] == "where 1.0"
    assert tally.totals(per=2)["calls"] == 1.5
