"""Exactly once under crashes (issue 10): a micro-batch of the primary-key join killed at any
commit point and re-run leaves every table exactly as an uninterrupted run does: no duplicate,
no gap.

The commit points are discovered, not listed: a clean run of the batch under test records its
`write_delta` calls (the batch log's plan, the output, the quarantine, the keyed state, the
done record), and the crash is injected before and after each of them in turn, each case on a
copy of the same lake (sources landed, one batch already run).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.incremental import BatchLog
from joins.operators.table_table_join.spark_replay import ReplayLake
from tests.spark.test_stream_table_crash import InjectedCrash, counting
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
    """Every row of the join's tables (all columns, lineage included) and the last done record
    (without commit versions, which a re-run that skips a landed write cannot know)."""
    out: dict[str, Any] = {}
    for name in ("output", "quarantine", "current"):
        path = f"{replay.join_root}/{name}"
        if lake.table_exists(path):
            out[name] = sorted(tuple(str(v) for v in row)
                               for row in lake.read_delta(replay.spark, path).collect())
    done = BatchLog(f"{replay.join_root}/checkpoints", "table_table_join").tail().last_done
    assert done is not None
    out["done"] = (done.batch_id, sorted(done.consumed.items()), sorted(done.carry.items()),
                   repr(sorted(done.report.items())))
    return out


@dataclass
class Prepared:
    spark: Any
    spec: Any
    base: Path
    clean: dict[str, Any]
    writes: list[str]

    def copy(self, dst: Path) -> ReplayLake:
        shutil.copytree(self.base, dst)
        return ReplayLake(self.spark, self.spec, str(dst), create=False, quarantine_expired=True)


@pytest.fixture(scope="module", params=sorted(CASES))
def prepared(request: pytest.FixtureRequest, spark: Any,
             tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    case = CASES[request.param]
    tmp = tmp_path_factory.mktemp(f"ttj-crash-{request.param}")
    spec = spec_of(case.config)
    base = tmp / "base"
    replay = ReplayLake(spark, spec, str(base), quarantine_expired=True)
    replay.land(records_of(case.first))
    replay.run()
    replay.land(records_of(case.second, start=len(case.first)))
    prepared = Prepared(spark, spec, base, {}, [])
    clean = prepared.copy(tmp / "clean")
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, lambda _i, name: prepared.writes.append(name))
        report = clean.run()
    assert not report.skipped and report.rows_out > 0
    prepared.clean = snapshot(clean)
    return prepared


def crash_and_rerun(prepared: Prepared, dst: Path, index: int, when: str) -> dict[str, Any]:
    replay = prepared.copy(dst)
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, lambda i, _name: when if i == index else None)
        with pytest.raises(InjectedCrash):
            replay.run()
    replay.run()
    return snapshot(replay)


def test_commit_points(prepared: Prepared) -> None:
    assert prepared.writes[0] == prepared.writes[-1] == "checkpoints"
    assert prepared.writes[1] == "output" and "current" in prepared.writes
    expect_quarantine = "quarantine" in prepared.clean
    assert ("quarantine" in prepared.writes) == expect_quarantine


@pytest.mark.slow
def test_crash_at_every_commit_point_then_rerun(prepared: Prepared, tmp_path: Path,
                                                subtests: Any) -> None:
    for index, name in enumerate(prepared.writes):
        for when in ("before", "after"):
            with subtests.test(msg=f"crash {when} write {index} ({name})"):
                assert crash_and_rerun(prepared, tmp_path / f"{index}-{when}", index, when) \
                    == prepared.clean
