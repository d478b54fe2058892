"""Exactly once under crashes (issue 4, item 2): a micro-batch killed at any commit point and
re-run leaves the join's tables exactly as an uninterrupted run does: no duplicate, no gap.

The commit points are discovered, not listed: a clean run of the batch under test counts its
`write_delta` calls (the batch log's plan, the output, the quarantine, the buffer or the keyed
table state, the batch log's done record), and the crash is injected before and after each of
them in turn. Each case starts from a copy of the same lake (sources landed, one batch already
run), so every case crashes the same batch.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.incremental import BatchLog, BatchStateError
from joins.operators.stream_table_join.spark_replay import ReplayLake
from tests.spark.test_stream_table_incremental import records_of, spec_of

pytestmark = pytest.mark.spark


class InjectedCrash(RuntimeError):
    """The process 'dies' at a commit point."""


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
    """Everything a batch leaves behind, as comparable values: every row of the join's tables
    (all columns, lineage included) and the last batch's report (without commit versions,
    which a re-run that skips a landed write cannot know)."""
    spark = replay.spark
    out: dict[str, Any] = {}
    for name in ("output", "quarantine", "buffer", "unversioned_table"):
        path = getattr(replay.paths, name)
        if lake.table_exists(path):
            out[name] = sorted(tuple(str(v) for v in row) for row in lake.read_delta(spark, path).collect())
    done = BatchLog(replay.paths.checkpoints, "stream_table_join").tail().last_done
    assert done is not None
    report = {k: v for k, v in done.report.items() if k != "commits"}
    out["done"] = (done.batch_id, sorted(done.consumed.items()), sorted(done.carry.items()),
                   sorted(report.items(), key=lambda kv: kv[0]).__repr__())
    return out


@dataclass
class Prepared:
    spark: Any
    spec: Any
    base: Path
    clean: dict[str, Any]
    writes: list[str]  # target table of each write_delta call of the batch, in order

    def copy(self, dst: Path) -> ReplayLake:
        shutil.copytree(self.base, dst)
        return ReplayLake(self.spark, self.spec, str(dst), create=False)


def counting(monkeypatch: pytest.MonkeyPatch, on_call: Callable[[int, str], str | None]) -> None:
    """Route every write_delta through `on_call(index, table name)`, which may say 'before' or
    'after' to crash there."""
    real = lake.write_delta
    calls = {"n": 0}

    def wrapper(df: Any, path: Any, **kwargs: Any) -> Any:
        index = calls["n"]
        calls["n"] += 1
        name = Path(str(path)).name
        when = on_call(index, name)
        if when == "before":
            raise InjectedCrash(f"crash before write {index} ({name})")
        info = real(df, path, **kwargs)
        if when == "after":
            raise InjectedCrash(f"crash after write {index} ({name})")
        return info

    monkeypatch.setattr(lake, "write_delta", wrapper)


def prepare(spark: Any, tmp: Path, case: CrashCase) -> Prepared:
    spec = spec_of(case.config)
    base = tmp / "base"
    replay = ReplayLake(spark, spec, str(base))
    replay.land(records_of(case.first), 1)
    replay.run()
    replay.land(records_of(case.second, start=len(case.first)), 2)
    prepared = Prepared(spark, spec, base, {}, [])
    clean = prepared.copy(tmp / "clean")
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, lambda _i, name: prepared.writes.append(name))
        report = clean.run()
    assert not report.skipped and report.rows_out > 0
    prepared.clean = snapshot(clean)
    return prepared


@pytest.fixture(scope="module", params=sorted(CASES))
def prepared(request: pytest.FixtureRequest, spark: Any,
             tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return prepare(spark, tmp_path_factory.mktemp(f"crash-{request.param}"), CASES[request.param])


def crash_and_rerun(prepared: Prepared, dst: Path, index: int, when: str) -> dict[str, Any]:
    replay = prepared.copy(dst)
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, lambda i, _name: when if i == index else None)
        with pytest.raises(InjectedCrash):
            replay.run()
    replay.run()  # the re-run after the crash: finishes (or finds finished) the same batch
    return snapshot(replay)


def test_commit_points_are_the_expected_tables(prepared: Prepared) -> None:
    """The batch log's plan comes first and its done record last, every table in between."""
    assert prepared.writes[0] == prepared.writes[-1] == "checkpoints"
    assert "output" in prepared.writes
    assert len(prepared.writes) >= 4


@pytest.mark.slow
def test_crash_at_every_commit_point_then_rerun(prepared: Prepared, tmp_path: Path,
                                                subtests: Any) -> None:
    for index, name in enumerate(prepared.writes):
        for when in ("before", "after"):
            with subtests.test(msg=f"crash {when} write {index} ({name})"):
                state = crash_and_rerun(prepared, tmp_path / f"{index}-{when}", index, when)
                assert state == prepared.clean


def test_crash_after_output_commit_then_rerun(prepared: Prepared, tmp_path: Path) -> None:
    """The sharpest point: the output landed, the state did not. The re-run must not write
    the output again (duplicate) nor forget the rest (gap)."""
    index = prepared.writes.index("output")
    assert crash_and_rerun(prepared, tmp_path / "out", index, "after") == prepared.clean


def test_a_half_committed_batch_blocks_other_batch_ids(prepared: Prepared, tmp_path: Path) -> None:
    replay = prepared.copy(tmp_path / "blocked")
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, lambda i, _name: "after" if i == 0 else None)  # plan written, nothing else
        with pytest.raises(InjectedCrash):
            replay.run()
    with pytest.raises(BatchStateError, match="planned but not completed"):
        replay.run(batch_id=7)
