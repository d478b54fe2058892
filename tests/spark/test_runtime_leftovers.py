"""Leftovers of a crashed join writer (issue 9, point 5): files a micro-batch staged but never
committed are removed by the next micro-batch of the same join, after a fence commit that makes
a writer which was only paused fail instead of committing files that are gone."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.lake import write as lake_write
from joins.operators.table_table_join.spark_replay import ReplayLake
from tests.spark.test_table_table_crash import snapshot
from tests.spark.test_table_table_incremental import records_of, spec_of, versioned

pytestmark = pytest.mark.spark

CONFIG = {"join": "outer", "left": versioned(100), "right": versioned(100)}
FIRST = [{"side": "left", "key": "a", "value": "a1", "ts": 1},
         {"side": "right", "key": "a", "value": "b1", "ts": 2}]
SECOND = [{"side": "left", "key": "a", "value": "a2", "ts": 5},
          {"side": "right", "key": "c", "value": "c1", "ts": 6}]


class Died(BaseException):
    """The process dies inside a commit: no `except Exception` cleanup runs."""


def data_files(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet")
            if "_delta_log" not in p.parts}


def fence_messages(table: str) -> list[str]:
    from deltalake import DeltaTable

    return [c.get("userMetadata", "") for c in DeltaTable(table).history()
            if "fence" in str(c.get("userMetadata", ""))]


def lake_after_first(spark: Any, root: Path) -> ReplayLake:
    replay = ReplayLake(spark, spec_of(CONFIG), str(root))
    replay.land(records_of(FIRST))
    replay.run()
    replay.land(records_of(SECOND, start=len(FIRST)))
    return replay


def test_a_micro_batch_that_died_inside_its_output_commit_is_cleaned_by_the_next(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean = lake_after_first(spark, tmp_path / "clean")
    clean.run()
    want = snapshot(clean)

    replay = lake_after_first(spark, tmp_path / "crashed")
    output = Path(replay.join_root) / "output"
    before = data_files(output)
    real = lake_write.StagedWrite.commit

    def die_on_output(staged: lake_write.StagedWrite) -> Any:
        if staged.loc.uri.endswith("/output") and staged.pending:
            raise Died("killed between writing the output's files and committing them")
        return real(staged)

    monkeypatch.setattr(lake_write.StagedWrite, "commit", die_on_output)
    with pytest.raises(Died):
        replay.run()
    monkeypatch.undo()
    orphans = data_files(output) - before
    assert orphans, "the crashed write left no files: the test would prove nothing"
    # The next run comes later than the crash: files from the last two seconds before the fence
    # are kept (a coarse mtime could hide that they were written after it).
    for rel in orphans:
        os.utime(output / rel, (time.time() - 60, time.time() - 60))
    version = lake.delta_version(str(output))

    replay.run()
    assert data_files(output).isdisjoint(orphans)
    assert fence_messages(str(output)) == [
        "table_table_join micro-batch: fence before removing the files of a write that never "
        "committed"]
    assert version is not None and lake.delta_version(str(output)) == version + 2  # fence, batch
    assert snapshot(replay) == want
    # A clean batch does not look for leftovers (no fence, no listing).
    replay.land(records_of([{"side": "left", "key": "d", "value": "d1", "ts": 7}], start=4))
    assert not replay.run().skipped
    assert len(fence_messages(str(output))) == 1


def test_a_paused_writer_fenced_by_its_successor_commits_nothing(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "t")
    lake.write_delta(spark.createDataFrame([(1, "a")], "k long, v string"), path)
    real = lake_write.StagedWrite.commit

    def successor_fences_meanwhile(staged: lake_write.StagedWrite) -> Any:
        # The writer's files are written, its commit pending: it is "paused" here, its lease
        # expires, and its successor fences the table before removing leftovers.
        monkeypatch.setattr(lake_write.StagedWrite, "commit", real)
        lake.remove_leftovers(spark, [path], writer="successor", before_commit=lambda: None)
        return real(staged)

    monkeypatch.setattr(lake_write.StagedWrite, "commit", successor_fences_meanwhile)
    with pytest.raises(lake.ConcurrentCommitError):
        lake.write_delta(spark.createDataFrame([(2, "b")], "k long, v string"), path,
                         app_txn=lake.AppTxn("join.output", 3), exclusive=True)
    monkeypatch.undo()
    assert sorted(tuple(r) for r in lake.read_delta(spark, path).collect()) == [(1, "a")]
    assert lake.txn_version(path, "join.output") is None
    assert fence_messages(path) == [
        "successor: fence before removing the files of a write that never committed"]
    assert lake.vacuum_orphans(path, older_than=dt.timedelta(0), dry_run=True) == []


def test_files_written_after_the_fence_are_kept(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    lake.write_delta(spark.createDataFrame([(1, "a")], "k long, v string"), str(path))
    [committed] = data_files(path)
    old, new = path / "part-old.parquet", path / "part-new.parquet"
    shutil.copy(path / committed, old)
    shutil.copy(path / committed, new)
    os.utime(old, (time.time() - 600, time.time() - 600))
    # A write that planned against the fenced version and is still running owns this one.
    os.utime(new, (time.time() + 600, time.time() + 600))
    removed = lake.remove_leftovers(spark, [str(path)], writer="w", before_commit=lambda: None)
    assert removed == {str(path): ["part-old.parquet"]}
    assert new.exists() and not old.exists()
