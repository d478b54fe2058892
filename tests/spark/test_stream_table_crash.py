"""Exactly once under crashes (issue 4, item 2): a micro-batch killed at any commit point and
re-run leaves the join's tables exactly as an uninterrupted run does: no duplicate, no gap.

The commit points are discovered, not listed: a clean run of the batch under test counts its
`write_delta` calls (the batch log's plan, the output, the quarantine, the buffer or the keyed
table state, the batch log's done record), and the crash is injected in every gap between two
of them in turn (`crash.crash_points`). Each case starts from a copy of the same lake (sources
landed, one batch already run), so every case crashes the same batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from joins.incremental import BatchStateError
from joins.operators.stream_table_join.spark_replay import ReplayLake
from tests.spark import crash
from tests.spark.crash import Prepared
from tests.spark.test_stream_table_incremental import records_of, spec_of

pytestmark = pytest.mark.spark


@dataclass(frozen=True)
class CrashCase:
    config: dict[str, Any]
    first: list[dict[str, Any]]    # landed and run before the crash
    second: list[dict[str, Any]]   # the batch that crashes


CASES = {
    # Writes plan, output, quarantine, buffer, done.
    "versioned_grace_quarantine": CrashCase(
        config={"join": "left", "table": {"versioned": True, "history_retention_ms": 20},
                "grace_ms": 3, "late": "quarantine"},
        first=[{"side": "table", "key": "a", "value": "a0", "ts": 0},
               {"side": "stream", "key": "a", "value": "s1", "ts": 5},
               {"side": "stream", "key": "b", "value": "s2", "ts": 4}],
        second=[{"side": "table", "key": "a", "value": "a4", "ts": 4},
                {"side": "stream", "key": "a", "value": "s3", "ts": 9},
                {"side": "stream", "key": "b", "value": "s4", "ts": 1},   # late: quarantined
                {"side": "stream", "key": "a", "value": "s5", "ts": 7}]),
    # Writes plan, output, keyed table state, done.
    "unversioned": CrashCase(
        config={"join": "inner", "table": {"versioned": False}},
        first=[{"side": "table", "key": "a", "value": "a0", "ts": 0},
               {"side": "stream", "key": "a", "value": "s1", "ts": 5}],
        second=[{"side": "table", "key": "a", "value": "a1", "ts": 1},
                {"side": "table", "key": "b", "value": "b1", "ts": 1},
                {"side": "stream", "key": "a", "value": "s2", "ts": 6},
                {"side": "stream", "key": "b", "value": "s3", "ts": 7}]),
}


def snapshot(replay: ReplayLake) -> dict[str, Any]:
    """Every row of the join's tables and the last batch's report, without commit versions."""
    tables = {name: getattr(replay.paths, name)
              for name in ("output", "quarantine", "buffer", "unversioned_table")}
    return crash.lake_state(replay.spark, tables, replay.paths.checkpoints, "stream_table_join",
                            report_without=("commits",))


def prepare(spark: Any, tmp: Path, case: CrashCase) -> Prepared:
    spec = spec_of(case.config)
    base = tmp / "base"
    replay = ReplayLake(spark, spec, str(base))
    replay.land(records_of(case.first), 1)
    replay.run()
    replay.land(records_of(case.second, start=len(case.first)), 2)
    prepared, report = crash.run_clean(
        base, lambda dst: ReplayLake(spark, spec, str(dst), create=False), snapshot)
    assert not report.skipped and report.rows_out > 0
    return prepared


@pytest.fixture(scope="module", params=sorted(CASES))
def prepared(request: pytest.FixtureRequest, spark: Any,
             tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return prepare(spark, tmp_path_factory.mktemp(f"crash-{request.param}"), CASES[request.param])


def test_commit_points_are_the_expected_tables(prepared: Prepared) -> None:
    """The batch log's plan comes first and its done record last, every table in between."""
    assert prepared.writes[0] == prepared.writes[-1] == "checkpoints"
    assert "output" in prepared.writes
    assert len(prepared.writes) >= 4


@pytest.mark.slow
def test_crash_at_every_commit_point_then_rerun(prepared: Prepared, tmp_path: Path,
                                                subtests: Any) -> None:
    crash.crash_at_every_commit_point(prepared, tmp_path, subtests)


def test_crash_after_output_commit_then_rerun(prepared: Prepared, tmp_path: Path) -> None:
    """The sharpest point: the output landed, the state did not. The re-run must not write
    the output again (duplicate) nor forget the rest (gap)."""
    index = prepared.writes.index("output")
    assert crash.crash_and_rerun(prepared, tmp_path / "out", index, "after") == prepared.clean


def test_a_half_committed_batch_blocks_other_batch_ids(prepared: Prepared, tmp_path: Path) -> None:
    replay = prepared.copy(tmp_path / "blocked")
    with pytest.MonkeyPatch.context() as mp:
        crash.counting(mp, lambda i, _name: "after" if i == 0 else None)  # plan written, nothing else
        with pytest.raises(crash.InjectedCrash):
            replay.run()
    with pytest.raises(BatchStateError, match="planned but not completed"):
        replay.run(batch_id=7)
