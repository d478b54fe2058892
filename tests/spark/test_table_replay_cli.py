"""`python -m joins replay FILE --engine spark --batch-size N` (issue 10, item 5): the command's
Spark engine prints what its reference engine prints for the same batch size, one scenario per
table operator, through the command's entry point on the test session (tests/replay_command.py);
and the command as a user starts it, in a child process, once."""

from __future__ import annotations

import json

import pytest

from tests.replay_command import SCENARIOS, replay, replay_in_a_child

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLE_SCENARIOS = ["000_table_table_left_join_versioned_delete_ts", "002_table_filter_versioned",
                   "002_table_aggregate_null_group_key"]


# Each operator at one batch size, each batch size once: the in-process scenario tests already
# run every scenario at 1, 2 and the whole input; what this adds is the command's own path.
@pytest.mark.parametrize(("name", "batch_size"), list(zip(TABLE_SCENARIOS, [1, 2, None], strict=True)),
                         ids=[f"{size}-{name}" for size, name in zip(["1", "2", "all"], TABLE_SCENARIOS,
                                                                      strict=True)])
def test_spark_replay_prints_what_the_reference_prints(spark: object, name: str,
                                                       batch_size: int | None) -> None:
    path = SCENARIOS / f"{name}.json"
    on_spark = replay(path, "spark", batch_size)
    assert on_spark.returncode == 0, on_spark.stderr[-3000:]
    whole = len(json.loads(path.read_text())["input"])
    reference = replay(path, "reference", batch_size or whole)
    assert reference.returncode == 0, reference.stderr[-3000:]
    assert on_spark.stdout.splitlines() == reference.stdout.splitlines()
    metrics = [line for line in reference.stderr.splitlines() if line.startswith("metrics:")]
    assert metrics == [line for line in on_spark.stderr.splitlines() if line.startswith("metrics:")]


def test_the_command_in_a_child_process_checks_a_scenario_on_spark() -> None:
    """`python -m joins replay FILE --engine spark --batch-size 1 --check` as a user runs it: a
    new interpreter that finds the package, starts its own Spark, replays the seed's example one
    record a batch and agrees with the file's expected output."""
    ran = replay_in_a_child(SCENARIOS / "004_stale_hash_record_at_a_time.json", "spark", 1, check=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "OK 004_stale_hash_record_at_a_time" in ran.stderr
    assert ran.stdout.strip(), "the command printed no output rows"
    # The driver logs by the project's file (joins/spark/log4j2.properties): no start-up notes.
    for note in ("Using Spark's default log4j profile", "Setting default log level",
                 "NativeCodeLoader"):
        assert note not in ran.stderr, ran.stderr[:2000]
