"""`python -m joins replay FILE --engine spark --batch-size N` for the table operators (issue
10, item 5): the command's Spark engine prints what its reference engine prints for the same
batch size, one scenario per operator, in a child process (the command as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["000_table_table_left_join_versioned_delete_ts", "002_table_filter_versioned",
             "002_table_aggregate_null_group_key"]


def replay(path: Path, engine: str, batch_size: int | None) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "joins", "replay", str(path), "--engine", engine]
    if batch_size is not None:
        args += ["--batch-size", str(batch_size)]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1800)


# Each operator at one batch size, each batch size once: a child process starts its own JVM
# (tens of seconds), and the in-process scenario tests already run every scenario at 1, 2 and
# the whole input; what this adds is the command's own path.
@pytest.mark.parametrize(("name", "batch_size"), list(zip(SCENARIOS, [1, 2, None], strict=True)),
                         ids=[f"{size}-{name}" for size, name in zip(["1", "2", "all"], SCENARIOS,
                                                                      strict=True)])
def test_spark_replay_prints_what_the_reference_prints(name: str, batch_size: int | None) -> None:
    path = ROOT / "tests" / "scenarios" / f"{name}.json"
    spark = replay(path, "spark", batch_size)
    assert spark.returncode == 0, spark.stderr[-3000:]
    whole = len(json.loads(path.read_text())["input"])
    reference = replay(path, "reference", batch_size or whole)
    assert reference.returncode == 0, reference.stderr[-3000:]
    assert spark.stdout.splitlines() == reference.stdout.splitlines()
    metrics = [line for line in reference.stderr.splitlines() if line.startswith("metrics:")]
    assert metrics == [line for line in spark.stderr.splitlines() if line.startswith("metrics:")]
