"""Writes staged side by side and committed one by one (issue 8, latency): `lake.stage_delta`
leaves the table unchanged until the commit, the commit keeps `exclusive`'s guard, an abandoned
write leaves no file behind; `joins.spark.parallel` runs calls at once and reports failures; a
micro-batch whose second table fails to stage commits nothing and leaves no files, and its
re-run gives the uninterrupted result."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.spark import parallel
from tests.spark.test_runtime_leftovers import data_files
from tests.spark.test_stream_table_crash import CASES, snapshot
from tests.spark.test_stream_table_incremental import records_of, spec_of

pytestmark = pytest.mark.spark


def committed_files(path: Path) -> set[str]:
    from deltalake import DeltaTable

    return {str(Path(u.removeprefix("file://")).relative_to(path))
            for u in DeltaTable(str(path)).file_uris()}


def test_a_staged_write_changes_nothing_until_committed(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    lake.write_delta(spark.createDataFrame([(1, "a")], "k long, v string"), str(path))
    staged = lake.stage_delta(spark.createDataFrame([(2, "b")], "k long, v string"), str(path),
                              exclusive=True)
    assert staged.pending and lake.delta_version(str(path)) == 0
    assert sorted(lake.read_delta(spark, str(path)).collect()) == [(1, "a")]
    info = lake.write_delta(staged, str(path))
    assert info.version == 1 and info.rows == 1
    assert sorted(lake.read_delta(spark, str(path)).collect()) == [(1, "a"), (2, "b")]
    assert data_files(path) == committed_files(path)
    assert lake.write_delta(staged, str(path)) == info  # a second commit is the same answer


def test_an_abandoned_write_leaves_no_file(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    lake.write_delta(spark.createDataFrame([(1, "a")], "k long, v string"), str(path))
    before = data_files(path)
    staged = lake.stage_delta(spark.createDataFrame([(2, "b")], "k long, v string"), str(path))
    assert data_files(path) - before, "nothing was staged: the test would prove nothing"
    staged.abandon()
    assert data_files(path) == before and lake.delta_version(str(path)) == 0


def test_a_commit_staged_before_another_writer_committed_fails_exclusive(
        spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    lake.write_delta(spark.createDataFrame([(1, "a")], "k long, v string"), str(path))
    staged = lake.stage_delta(spark.createDataFrame([(2, "b")], "k long, v string"), str(path),
                              exclusive=True)
    lake.write_delta(spark.createDataFrame([(3, "c")], "k long, v string"), str(path))
    with pytest.raises(lake.ConcurrentCommitError, match="another writer committed"):
        lake.write_delta(staged, str(path))
    assert sorted(lake.read_delta(spark, str(path)).collect()) == [(1, "a"), (3, "c")]
    assert data_files(path) == committed_files(path)


def test_a_staged_write_commits_only_to_its_table(spark: Any, tmp_path: Path) -> None:
    staged = lake.stage_delta(spark.createDataFrame([(1, "a")], "k long, v string"),
                              str(tmp_path / "t"))
    with pytest.raises(lake.LakeError, match="staged for"):
        lake.write_delta(staged, str(tmp_path / "other"))
    staged.abandon()


def test_run_all_runs_at_once_and_raises_the_first_failure_after_all_finished(spark: Any) -> None:
    both = threading.Barrier(2, timeout=30)  # each call waits for the other: only at once
    finished: list[int] = []

    def call(i: int, fail: bool) -> Any:
        def run() -> int:
            both.wait()
            finished.append(i)
            if fail:
                raise ValueError(f"call {i} failed")
            return i
        return run

    assert parallel.run_all(spark, [call(0, False), call(1, False)]) == [0, 1]
    both.reset()
    finished.clear()
    with pytest.raises(ValueError, match="call 1 failed"):
        parallel.run_all(spark, [call(0, False), call(1, True)])
    assert sorted(finished) == [0, 1]


def test_threads_keep_the_callers_job_group(spark: Any) -> None:
    from joins.incremental.phases import job_group

    sc = spark.sparkContext
    with job_group(spark, "tj-test:group", "test"):
        groups = parallel.run_all(spark, [lambda: sc.getLocalProperty("spark.jobGroup.id")] * 2)
    assert groups == ["tj-test:group", "tj-test:group"]


def test_a_batch_whose_buffer_fails_to_stage_commits_nothing_and_leaves_no_file(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from joins.operators.stream_table_join.spark_replay import ReplayLake

    case = CASES["versioned_grace_quarantine"]
    lakes = {}
    for name in ("clean", "failed"):
        replay = ReplayLake(spark, spec_of(case.config), str(tmp_path / name))
        replay.land(records_of(case.first), 1)
        replay.run()
        replay.land(records_of(case.second, start=len(case.first)), 2)
        lakes[name] = replay
    lakes["clean"].run()

    replay = lakes["failed"]
    tables = {t: Path(getattr(replay.paths, t)) for t in ("output", "quarantine", "buffer")}
    before = {t: data_files(p) if p.exists() else set() for t, p in tables.items()}
    versions = {t: lake.delta_version(str(p)) for t, p in tables.items()}
    real = lake.stage_delta

    def fail_buffer(df: Any, path: Any, **kwargs: Any) -> Any:
        if Path(str(path)).name == "buffer":
            raise OSError("disk full while writing the buffer")
        return real(df, path, **kwargs)

    monkeypatch.setattr(lake, "stage_delta", fail_buffer)
    with pytest.raises(OSError, match="disk full"):
        replay.run()
    monkeypatch.undo()
    assert {t: lake.delta_version(str(p)) for t, p in tables.items()} == versions
    assert {t: data_files(p) if p.exists() else set() for t, p in tables.items()} == before
    replay.run()
    assert snapshot(replay) == snapshot(lakes["clean"])
