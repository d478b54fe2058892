"""`python -m joins replay --engine spark` on `versioned_table` scenarios (issue 29, point 2):
puts through the ingest into Delta, gets through the user query path (joins.query.versioned).

Every shipped versioned-table scenario, through the command's entry point on the test session
(tests/replay_command.py): one op a batch passes the file's own `--check`; the whole input as
one batch prints what the reference engine prints for that batch (the file's `after_input`
values are per op, so there the items agree with the file's once `after_input` is set aside).
The config-error scenarios raise their expected error on Spark too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.replay_command import SCENARIOS, replay

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _versioned(errors: bool) -> list[Path]:
    return [p for p in sorted(SCENARIOS.glob("*.json"))
            if (raw := json.loads(p.read_text())).get("operator") == "versioned_table"
            and (raw.get("expected_error") is not None) == errors]


def _without_after_input(lines: list[str]) -> list[dict[str, Any]]:
    return [{k: v for k, v in json.loads(line).items() if k != "after_input"} for line in lines]


def _metrics(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("metrics:")]


def test_the_shipped_versioned_scenarios_are_found() -> None:
    assert len(_versioned(False)) >= 8 and len(_versioned(True)) >= 3


@pytest.mark.parametrize("path", _versioned(False), ids=lambda p: p.stem)
def test_versioned_scenario_on_spark_one_op_a_batch(spark: Any, path: Path) -> None:
    ran = replay(path, "spark", 1, check=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert f"OK {path.stem}" in ran.stderr


@pytest.mark.parametrize("path", _versioned(False), ids=lambda p: p.stem)
def test_versioned_scenario_on_spark_in_one_batch(spark: Any, path: Path) -> None:
    on_spark = replay(path, "spark", None)
    assert on_spark.returncode == 0, on_spark.stderr[-3000:]
    raw = json.loads(path.read_text())
    reference = replay(path, "reference", len(raw["input"]))
    assert on_spark.stdout.splitlines() == reference.stdout.splitlines()
    assert _metrics(on_spark.stderr) == _metrics(reference.stderr)
    expected = [{k: v for k, v in item.items() if k != "after_input"} for item in raw["expected"]]
    assert _without_after_input(on_spark.stdout.splitlines()) == expected


@pytest.mark.parametrize("path", _versioned(True), ids=lambda p: p.stem)
def test_versioned_config_errors_on_spark(path: Path) -> None:
    ran = replay(path, "spark", None, check=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "raised the expected error" in ran.stderr
