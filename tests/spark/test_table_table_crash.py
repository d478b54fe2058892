"""Exactly once under crashes (issue 10): a micro-batch of the primary-key join killed at any
commit point and re-run leaves every table exactly as an uninterrupted run does: no duplicate,
no gap.

The commit points are discovered, not listed: a clean run of the batch under test records its
`write_delta` calls (the batch log's plan, the output, the quarantine, the keyed state, the
done record), and the crash is injected in every gap between two of them in turn
(`crash.crash_points`), each case on a copy of the same lake (sources landed, one batch already
run).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from joins.operators.table_table_join.spark_replay import ReplayLake
from tests.spark import crash
from tests.spark.crash import Prepared
from tests.spark.test_table_table_incremental import records_of, spec_of, versioned

pytestmark = pytest.mark.spark


@dataclass(frozen=True)
class CrashCase:
    config: dict[str, Any]
    first: list[dict[str, Any]]
    second: list[dict[str, Any]]


CASES = {
    # Writes plan, output, quarantine, current, done.
    "versioned_expired_quarantined": CrashCase(
        config={"join": "outer", "left": versioned(10), "right": versioned(10)},
        first=[{"side": "left", "key": "a", "value": "a1", "ts": 1},
               {"side": "right", "key": "b", "value": "b1", "ts": 3}],
        second=[{"side": "left", "key": "a", "value": "a2", "ts": 30},
                {"side": "left", "key": "c", "value": "c1", "ts": 5},     # expired
                {"side": "right", "key": "a", "value": "r1", "ts": 2},
                {"side": "right", "key": "b", "value": None, "ts": 4},
                {"side": "left", "key": "a", "value": "old", "ts": 29}]),  # out of order
    # Writes plan, output, current, done.
    "unversioned_inner": CrashCase(
        config={"join": "inner", "left": {"versioned": False}, "right": {"versioned": False}},
        first=[{"side": "left", "key": "a", "value": "a1", "ts": 1},
               {"side": "right", "key": "a", "value": "b1", "ts": 1}],
        second=[{"side": "left", "key": "a", "value": None, "ts": 2},
                {"side": "right", "key": "c", "value": "c1", "ts": 2},
                {"side": "left", "key": "c", "value": "l1", "ts": 0}]),
}


def snapshot(replay: ReplayLake) -> dict[str, Any]:
    """Every row of the join's tables and the last done record."""
    return crash.join_state(replay, ("output", "quarantine", "current"), "table_table_join")


@pytest.fixture(scope="module", params=sorted(CASES))
def prepared(request: pytest.FixtureRequest, spark: Any,
             tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    case = CASES[request.param]
    tmp = tmp_path_factory.mktemp(f"ttj-crash-{request.param}")
    spec = spec_of(case.config)
    prepared, report = crash.prepare_lake(
        tmp, lambda root, create: ReplayLake(spark, spec, str(root), create=create,
                                             quarantine_expired=True),
        records_of(case.first), records_of(case.second, start=len(case.first)), snapshot)
    assert not report.skipped and report.rows_out > 0
    return prepared


def test_commit_points(prepared: Prepared) -> None:
    assert prepared.writes[0] == prepared.writes[-1] == "checkpoints"
    assert prepared.writes[1] == "output" and "current" in prepared.writes
    expect_quarantine = "quarantine" in prepared.clean
    assert ("quarantine" in prepared.writes) == expect_quarantine


@pytest.mark.slow
def test_crash_at_every_commit_point_then_rerun(prepared: Prepared, tmp_path: Path,
                                                subtests: Any) -> None:
    crash.crash_at_every_commit_point(prepared, tmp_path, subtests)
