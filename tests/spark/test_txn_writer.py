"""The delta-spark transaction writer (joins/lake/txn_write.py): the promises of `write_delta`
and `stage_delta` it keeps on delta-spark's own transaction (idempotent app transactions read
from the version checksum, the version guard, the fence of a paused writer, partition
replacement), and that its commits are delta-spark's (a version checksum beside each)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from joins import lake

pytestmark = pytest.mark.spark

SCHEMA = "k long, v string, day date"
D1, D2 = dt.date(2024, 3, 1), dt.date(2024, 3, 2)


def rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in lake.read_delta(spark, str(path)).collect())


def test_commits_are_delta_spark_s_and_app_transactions_land_once(spark: Any,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "t"
    frame = spark.createDataFrame([(1, "a", D1)], SCHEMA)
    first = lake.write_delta(frame, str(path), partition_by=["day"], app_txn=lake.AppTxn("app", 1))
    assert (first.version, first.rows, first.files) == (0, 1, 1)
    second = lake.write_delta(spark.createDataFrame([(2, "b", D2)], SCHEMA), str(path),
                              app_txn=lake.AppTxn("app", 2))
    assert second.version == 1 and second.partitions == ((("day", "2024-03-02"),),)
    again = lake.write_delta(spark.createDataFrame([(2, "b", D2)], SCHEMA), str(path),
                             app_txn=lake.AppTxn("app", 2))
    assert again.skipped and lake.delta_version(str(path)) == 1
    assert rows(spark, path) == [(1, "a", D1), (2, "b", D2)]
    assert lake.txn_version(str(path), "app") == 2
    # What a re-run whose write was skipped learns of the commit a crashed run made.
    found = lake.committed_write(str(path), lake.AppTxn("app", 2))
    assert found is not None and (found.version, found.rows) == (1, 1)
    # delta-spark's commits carry their version checksum, where the app transactions are read.
    assert (path / "_delta_log" / f"{1:020d}.crc").exists()


def test_the_version_guard_refuses_a_moved_table(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    frame = spark.createDataFrame([(1, "a", D1)], SCHEMA)
    lake.write_delta(frame, path, expected_version=-1)
    with pytest.raises(lake.ConcurrentCommitError):
        lake.write_delta(frame, path, expected_version=-1)
    lake.write_delta(frame, path, expected_version=0)
    with pytest.raises(lake.ConcurrentCommitError, match="expected the table at version 0"):
        lake.write_delta(frame, path, mode="overwrite", expected_version=0)
    assert lake.delta_version(path) == 1 and len(rows(spark, Path(path))) == 2


def test_a_guarded_write_adds_columns_in_its_own_commit(spark: Any, tmp_path: Path) -> None:
    """One commit, not an ALTER TABLE and then the data: a crash or a lost guard between the
    two would have left a table widened by a write that never landed."""
    path = str(tmp_path / "t")
    lake.write_delta(spark.createDataFrame([(1, "a", D1)], SCHEMA), path, partition_by=["day"])
    wider = spark.createDataFrame([(2, "b", D2, 2.5)], f"{SCHEMA}, x double")
    with pytest.raises(lake.ConcurrentCommitError):
        lake.write_delta(wider, path, schema_mode="merge", expected_version=1)
    assert lake.delta_version(path) == 0 and "x" not in lake.table_schema(path).fieldNames()
    info = lake.write_delta(wider, path, schema_mode="merge", expected_version=0,
                            app_txn=lake.AppTxn("app", 1))
    assert info.version == 1 and lake.delta_version(path) == 1
    assert rows(spark, Path(path)) == [(1, "a", D1, None), (2, "b", D2, 2.5)]


def test_a_commit_staged_before_another_commit_fails_and_leaves_no_file(
        spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    lake.write_delta(spark.createDataFrame([(1, "a", D1)], SCHEMA), str(path))
    staged = lake.stage_delta(spark.createDataFrame([(2, "b", D1)], SCHEMA), str(path),
                              exclusive=True)
    lake.write_delta(spark.createDataFrame([(3, "c", D1)], SCHEMA), str(path))   # a successor
    before = {p.name for p in path.rglob("*.parquet")}
    with pytest.raises(lake.ConcurrentCommitError):
        lake.write_delta(staged, str(path))
    assert rows(spark, path) == [(1, "a", D1), (3, "c", D1)]
    assert {p.name for p in path.rglob("*.parquet")} < before   # its own file is gone


def test_the_fence_fails_a_paused_writer(spark: Any, tmp_path: Path) -> None:
    """A writer staged under its lease, paused past it; its successor fences before removing
    leftovers: the paused commit fails instead of landing."""
    from joins.lake.location import TableLocation
    from joins.lake.txn_write import fence

    path = tmp_path / "t"
    lake.write_delta(spark.createDataFrame([(1, "a", D1)], SCHEMA), str(path))
    paused = lake.stage_delta(spark.createDataFrame([(2, "b", D1)], SCHEMA), str(path),
                              exclusive=True, app_txn=lake.AppTxn("join.output", 7))
    fence(spark, TableLocation.of(str(path)), "successor")
    with pytest.raises(lake.ConcurrentCommitError):
        lake.write_delta(paused, str(path))
    assert rows(spark, path) == [(1, "a", D1)]
    assert lake.txn_version(str(path), "join.output") is None


def test_a_partition_replacement_removes_only_its_days(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    lake.write_delta(spark.createDataFrame([(1, "a", D1), (2, "b", D2)], SCHEMA), str(path),
                     partition_by=["day"])
    info = lake.write_delta(spark.createDataFrame([(9, "z", D1)], SCHEMA), str(path),
                            mode="overwrite", replace_partitions={"day": [D1]})
    assert info.version == 1
    assert rows(spark, path) == [(2, "b", D2), (9, "z", D1)]
    with pytest.raises(lake.LakeError, match="outside replace_partitions"):
        lake.write_delta(spark.createDataFrame([(8, "y", D2)], SCHEMA), str(path),
                         mode="overwrite", replace_partitions={"day": [D1]})
    assert lake.delta_version(str(path)) == 1


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_a_write_that_creates_its_table_runs_no_query_for_the_files_before_it(
        spark: Any, tmp_path: Path, mode: str) -> None:
    """delta-spark would list the not-yet-existing table's files with a query of its own (a
    second Spark job) to derive the first version's file list; `temporaljoins.NewTable` knows it
    is empty. The list must still land in the first checksum, where later commits read it."""
    import json

    from joins.spark.connect import is_connect

    frame = spark.createDataFrame([(1, "a", D1), (2, "b", D2)], SCHEMA)
    # Through Spark Connect the jobs run in the server, out of the client's sight: there the
    # test checks what the commits wrote.
    scheduler = None if is_connect(spark) else spark.sparkContext._jsc.sc().dagScheduler()

    def write(version: int) -> int | None:
        """The Spark jobs the write ran, where the client sees them."""
        before = None if scheduler is None else scheduler.numTotalJobs()
        lake.write_delta(frame, str(tmp_path / "t"), mode=mode, partition_by=["day"],
                         app_txn=lake.AppTxn("app", version))
        return None if before is None else scheduler.numTotalJobs() - before

    lake.write_delta(frame, str(tmp_path / "warm"))
    created, appended = write(1), write(2)
    if scheduler is not None:
        assert created == appended == 1, "creating the table ran a query of its own"
    first = json.loads((tmp_path / "t" / "_delta_log" / f"{0:020d}.crc").read_text())
    assert first["numFiles"] == 2 and len(first["allFiles"]) == 2, first
    assert [t["appId"] for t in first["setTransactions"]] == ["app"]
    second = json.loads((tmp_path / "t" / "_delta_log" / f"{1:020d}.crc").read_text())
    assert len(second["allFiles"]) == second["numFiles"] == (4 if mode == "append" else 2)
    assert len(rows(spark, tmp_path / "t")) == (4 if mode == "append" else 2)


def test_without_statistics_a_committed_empty_file_stays(spark: Any, tmp_path: Path) -> None:
    """Spark writes an empty file when an unpartitioned write's first task has no rows. With
    statistics collection on (the default), Delta leaves it out of the commit and the writer
    removes it; with it off, Delta commits it, and the next write must not take it for its own
    leftover (a committed file gone: the table unreadable)."""
    path = str(tmp_path / "t")

    def first_task_empty(k: int) -> Any:
        return spark.range(0, 2, 1, 2).where("id = 1").selectExpr(f"{k} AS k", "'x' AS v")

    spark.conf.set("spark.databricks.delta.stats.collect", "false")
    try:
        lake.write_delta(first_task_empty(1), path)
        lake.write_delta(first_task_empty(2), path)
    finally:
        spark.conf.unset("spark.databricks.delta.stats.collect")
    assert rows(spark, Path(path)) == [(1, "x"), (2, "x")]
    lake.write_delta(first_task_empty(3), path)   # statistics on again: its empty file goes
    assert rows(spark, Path(path)) == [(1, "x"), (2, "x"), (3, "x")]
    log = lake.table_summary(path)
    assert log.files == len([p for p in Path(path).glob("part-*.parquet")]), log
