"""Exactly once under crashes (issue 12): an interval join micro-batch killed before or after
any of its commits and re-run leaves every table exactly as an uninterrupted run does: no
duplicate, no gap; unused flags and watermarks survive.

The commit points are discovered, not listed: a clean run of the batch under test counts its
`write_delta` calls (plan, output, quarantine, both buffers, the used flags, done).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.incremental import BatchLog
from joins.operators.interval_join.spark_replay import ReplayLake
from tests.spark.test_interval_incremental import records_of, spec_of
from tests.spark.test_stream_table_crash import InjectedCrash, counting

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
    out: dict[str, Any] = {}
    for name in TABLES:
        path = f"{replay.join_root}/{name}"
        if lake.table_exists(path):
            out[name] = sorted(tuple(str(v) for v in row)
                               for row in lake.read_delta(replay.spark, path).collect())
    done = BatchLog(f"{replay.join_root}/checkpoints", "interval_join").tail().last_done
    assert done is not None
    report = {k: v for k, v in done.report.items() if k not in ("commits", "timings")}
    out["done"] = repr((done.batch_id, sorted(done.consumed.items()), done.carry,
                        sorted(report.items())))
    return out


@dataclass
class Prepared:
    spark: Any
    base: Path
    clean: dict[str, Any]
    writes: list[str]

    def copy(self, dst: Path) -> ReplayLake:
        shutil.copytree(self.base, dst)
        spec = spec_of(**SPEC)
        return ReplayLake(self.spark, spec, str(dst), records_of(FIRST + SECOND), create=False)


@pytest.fixture(scope="module")
def prepared(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    tmp = tmp_path_factory.mktemp("interval-crash")
    records = records_of(FIRST + SECOND)
    replay = ReplayLake(spark, spec_of(**SPEC), str(tmp / "base"), records)
    replay.land(records[:len(FIRST)])
    replay.run()
    replay.land(records[len(FIRST):])
    result = Prepared(spark, tmp / "base", {}, [])
    clean = result.copy(tmp / "clean")
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, lambda _i, name: result.writes.append(name))
        report = clean.run()
    assert report.rows_out > 0 and report.null_padded == {"left": 1, "right": 1}
    assert report.late_quarantined == {"left": 1, "right": 0}
    result.clean = snapshot(clean)
    return result


def crash_and_rerun(prepared: Prepared, dst: Path, index: int, when: str) -> dict[str, Any]:
    replay = prepared.copy(dst)
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, lambda i, _name: when if i == index else None)
        with pytest.raises(InjectedCrash):
            replay.run()
    replay.run()
    return snapshot(replay)


def test_the_batch_commits_every_table(prepared: Prepared) -> None:
    assert prepared.writes[0] == prepared.writes[-1] == "checkpoints"
    assert sorted(set(prepared.writes[1:-1])) == sorted(TABLES)


@pytest.mark.slow
def test_crash_at_every_commit_point_then_rerun(prepared: Prepared, tmp_path: Path,
                                                subtests: Any) -> None:
    for index, name in enumerate(prepared.writes):
        for when in ("before", "after"):
            with subtests.test(msg=f"crash {when} write {index} ({name})"):
                state = crash_and_rerun(prepared, tmp_path / f"{index}-{when}", index, when)
                assert state == prepared.clean


def test_crash_after_output_commit_then_rerun(prepared: Prepared, tmp_path: Path) -> None:
    index = prepared.writes.index("output")
    assert crash_and_rerun(prepared, tmp_path / "out", index, "after") == prepared.clean
