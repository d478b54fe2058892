"""Exactly once under crashes (issue 12): an interval join micro-batch killed before or after
any of its commits and re-run leaves every table exactly as an uninterrupted run does: no
duplicate, no gap; unused flags and watermarks survive.

The commit points are discovered, not listed: a clean run of the batch under test counts its
`write_delta` calls (plan, output, quarantine, both buffers, the used flags, done).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from joins.operators.interval_join.spark_replay import ReplayLake
from tests.spark import crash
from tests.spark.crash import Prepared
from tests.spark.test_interval_incremental import records_of, spec_of

pytestmark = pytest.mark.spark

TABLES = ("output", "quarantine", "buffer")
FIRST = [
    {"side": "left", "row": {"id": "a0", "t": 1, "k": "x", "v": 1}},    # evicted unused: padded
    {"side": "left", "row": {"id": "a1", "t": 5, "k": "a", "v": 1}},    # joins b2, then evicted
    {"side": "right", "row": {"id": "b0", "t": 2, "k": "y", "v": 1}},   # evicted unused: padded
    {"side": "right", "row": {"id": "b1", "t": 20, "k": "b", "v": 1}},  # joins a3, then evicted
    {"side": "left", "row": {"id": "a2", "t": 30, "k": "c", "v": 1}},   # joins b4, stays: a flag
    {"side": "left", "watermark": {"t": 4}},
]
SECOND = [
    {"side": "right", "row": {"id": "b2", "t": 6, "k": "a", "v": 1}},
    {"side": "left", "row": {"id": "a3", "t": 21, "k": "b", "v": 1}},
    {"side": "left", "row": {"id": "late", "t": 3, "k": "a", "v": 1}},  # quarantined
    {"side": "right", "watermark": {"t": 15}},
    {"side": "left", "watermark": {"t": 25}},
    {"side": "left", "row": {"id": "a4", "t": 40, "k": "z", "v": 1}},
    {"side": "right", "row": {"id": "b3", "t": 41, "k": "q", "v": 1}},
    {"side": "right", "row": {"id": "b4", "t": 31, "k": "c", "v": 1}},
]
SPEC = dict(condition="l.t BETWEEN r.t - 2 AND r.t + 2 AND l.k = r.k", join="full",
            late="quarantine")


def snapshot(replay: ReplayLake) -> dict[str, Any]:
    """Every row of the join's tables and the last done record, without commit versions and
    timings."""
    return crash.join_state(replay, TABLES, "interval_join",
                            report_without=("commits", "timings"))


@pytest.fixture(scope="module")
def prepared(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    tmp = tmp_path_factory.mktemp("interval-crash")
    records, spec = records_of(FIRST + SECOND), spec_of(**SPEC)
    prepared, report = crash.prepare_lake(
        tmp, lambda root, create: ReplayLake(spark, spec, str(root), records, create=create),
        records[:len(FIRST)], records[len(FIRST):], snapshot)
    assert report.rows_out > 0 and report.null_padded == {"left": 1, "right": 1}
    assert report.late_quarantined == {"left": 1, "right": 0}
    return prepared


def test_the_batch_commits_every_table(prepared: Prepared) -> None:
    assert prepared.writes[0] == prepared.writes[-1] == "checkpoints"
    assert sorted(set(prepared.writes[1:-1])) == sorted(TABLES)


@pytest.mark.slow
def test_crash_at_every_commit_point_then_rerun(prepared: Prepared, tmp_path: Path,
                                                subtests: Any) -> None:
    crash.crash_at_every_commit_point(prepared, tmp_path, subtests)


def test_crash_after_output_commit_then_rerun(prepared: Prepared, tmp_path: Path) -> None:
    index = prepared.writes.index("output")
    assert crash.crash_and_rerun(prepared, tmp_path / "out", index, "after") == prepared.clean
