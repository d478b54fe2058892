"""Incremental reads, crash recovery (orphans), refusal of unreadable tables, foreign layouts."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, Schema
from deltalake.transaction import AddAction, create_table_with_add_actions

from joins.lake import (
    AppTxn,
    LakeError,
    UnsupportedTableError,
    change_stats,
    delta_version,
    read_changes,
    read_delta,
    txn_version,
    vacuum_orphans,
    write_delta,
)
from joins.lake.write import StagedWrite
from tests.lake.conftest import events, files_on_disk

pytestmark = pytest.mark.spark

DAY1 = [(1, "a", 1.0, "2024-01-01", None), (2, "b", 2.0, "2024-01-02", None)]
DAY2 = [(3, "c", 3.0, "2024-01-02", None)]
DAY3 = [(4, "d", 4.0, "2024-01-03", None), (5, "e", 5.0, "2024-01-01", None)]


def ids(df: Any) -> list[int]:
    return sorted(r.id for r in df.collect())


def test_read_changes_between_versions(spark, table: str) -> None:
    for batch in (DAY1, DAY2, DAY3):
        write_delta(events(spark, batch), table, partition_by=["event_date"])
    assert ids(read_changes(spark, table, 0)) == [3, 4, 5]
    assert ids(read_changes(spark, table, 0, 1)) == [3]
    assert ids(read_changes(spark, table, -1)) == [1, 2, 3, 4, 5]
    assert read_changes(spark, table, 2).count() == 0
    changes = read_changes(spark, table, 1, 2)
    assert changes.schema == read_delta(spark, table).schema
    assert sorted((r.id, r.event_date) for r in changes.collect()) == [
        (4, dt.date(2024, 1, 3)), (5, dt.date(2024, 1, 1))]
    with pytest.raises(LakeError, match="does not exist"):
        read_changes(spark, table, 0, 9)
    with pytest.raises(LakeError, match="from_version"):
        read_changes(spark, table, 2, 1)


def test_change_stats_count_nulls_per_column(spark, table: str) -> None:
    """Null counts are summed over the range's files (partition columns from their values);
    a range without nulls in a column says 0, which lets a micro-batch skip an aggregate."""
    write_delta(events(spark, DAY1), table, partition_by=["event_date"])
    write_delta(events(spark, [(3, None, 3.0, "2024-01-02", None), (4, "d", None, "2024-01-03", None)]),
                table, partition_by=["event_date"])
    first = change_stats(table, -1, 0)
    assert first.rows == 2 and first.nulls["id"] == 0 and first.nulls["name"] == 0
    assert first.nulls["event_date"] == 0 and first.nulls["ts"] == 2
    both = change_stats(table, -1, 1)
    assert both.rows == 4
    assert (both.nulls["id"], both.nulls["name"], both.nulls["amount"]) == (0, 1, 1)
    assert change_stats(table, 1, 1).nulls == {}


def test_read_changes_refuses_ranges_with_removals(spark, table: str) -> None:
    write_delta(events(spark, DAY1), table, partition_by=["event_date"])
    write_delta(events(spark, DAY2), table)
    write_delta(events(spark, DAY3), table, mode="overwrite",
                replace_partitions={"event_date": ["2024-01-01", "2024-01-03"]})
    write_delta(events(spark, [(6, "f", 6.0, "2024-01-04", None)]), table)
    assert ids(read_changes(spark, table, 0, 1)) == [3]
    assert ids(read_changes(spark, table, 2)) == [6]
    with pytest.raises(LakeError, match="version 2 removed data files"):
        read_changes(spark, table, 1)
    with pytest.raises(LakeError, match="version 2 removed"):
        read_changes(spark, table, 0, 2)


def test_merge_commits_count_as_changes_with_the_new_schema(spark, table: str) -> None:
    write_delta(events(spark, DAY1), table, partition_by=["event_date"])
    from pyspark.sql import functions as F
    write_delta(events(spark, DAY2).withColumn("extra", F.lit("x")), table, schema_mode="merge")
    changes = read_changes(spark, table, 0)
    assert [(r.id, r.extra) for r in changes.collect()] == [(3, "x")]


class Crash(BaseException):
    """The process dying (not an error the writer could handle)."""


def test_crash_before_commit_leaves_table_unchanged_and_orphans_vacuumable(
        spark, table: str, monkeypatch) -> None:
    write_delta(events(spark, DAY1), table, partition_by=["event_date"], app_txn=AppTxn("j", 1))
    before_disk, before_rows = files_on_disk(table), ids(read_delta(spark, table))

    def crash(_staged: Any) -> None:
        raise Crash     # the process dies between writing the files and committing them

    monkeypatch.setattr(StagedWrite, "commit", crash)
    with pytest.raises(Crash):
        write_delta(events(spark, DAY2 + DAY3), table, app_txn=AppTxn("j", 2))
    monkeypatch.undo()

    orphans = files_on_disk(table) - before_disk
    assert any(p.endswith(".parquet") for p in orphans)
    assert delta_version(table) == 0 and txn_version(table, "j") == 1
    assert ids(read_delta(spark, table)) == before_rows
    assert DeltaTable(table).to_pyarrow_table().num_rows == len(before_rows)

    assert vacuum_orphans(table, older_than=dt.timedelta(hours=1)) == []  # too young
    assert set(vacuum_orphans(table, older_than=dt.timedelta(0), dry_run=True)) == orphans
    assert files_on_disk(table) - before_disk == orphans
    assert set(vacuum_orphans(table, older_than=dt.timedelta(0))) == orphans
    assert files_on_disk(table) == before_disk
    assert ids(read_delta(spark, table)) == before_rows
    # the retry of the crashed batch commits normally
    assert write_delta(events(spark, DAY2 + DAY3), table, app_txn=AppTxn("j", 2)).version == 1
    assert ids(read_delta(spark, table)) == [1, 2, 3, 4, 5]


def test_vacuum_keeps_files_older_versions_need(spark, table: str) -> None:
    write_delta(events(spark, DAY1), table, partition_by=["event_date"])
    write_delta(events(spark, DAY2), table, mode="overwrite")
    removed_but_referenced = files_on_disk(table)
    stray = Path(table) / "event_date=2024-01-09" / "stray.parquet"
    stray.parent.mkdir()
    stray.write_bytes(b"junk")
    staging = Path(table) / "_staging" / "dead-write" / "event_date=2024-01-01"
    staging.mkdir(parents=True)
    (staging / "part-0.parquet").write_bytes(b"junk")
    (staging / ".part-0.parquet.crc").write_bytes(b"junk")
    assert vacuum_orphans(table, older_than=dt.timedelta(0)) == sorted([
        "_staging/dead-write/event_date=2024-01-01/.part-0.parquet.crc",
        "_staging/dead-write/event_date=2024-01-01/part-0.parquet",
        "event_date=2024-01-09/stray.parquet"])
    assert files_on_disk(table) == removed_but_referenced
    assert not stray.parent.exists() and not (Path(table) / "_staging" / "dead-write").exists()
    assert ids(read_delta(spark, table, version=0)) == [1, 2]


def test_vacuum_reads_checkpoints(spark, table: str) -> None:
    write_delta(events(spark, DAY1), table, partition_by=["event_date"])
    write_delta(events(spark, DAY1).limit(0), table, mode="append")
    DeltaTable(table).create_checkpoint()
    for name in os.listdir(Path(table) / "_delta_log"):
        if name == f"{0:020d}.json":
            # Log cleanup as Delta does it: commits before the checkpoint go, the checkpoint's
            # own commit stays (its time is the table's, delta-spark reads it).
            os.remove(Path(table) / "_delta_log" / name)
    assert vacuum_orphans(table, older_than=dt.timedelta(0)) == []
    assert ids(read_delta(spark, table)) == [1, 2]


# --- tables this layer must refuse, and other writers' layouts -----------------------------

def _log(path: Path, *actions: dict[str, Any]) -> None:
    (path / "_delta_log").mkdir(parents=True)
    text = "\n".join(json.dumps(a) for a in actions)
    (path / "_delta_log" / "00000000000000000000.json").write_text(text + "\n")


def _metadata(configuration: dict[str, str],
              field_metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    schema = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True,
                                            "metadata": field_metadata or {}}]}
    return {"metaData": {"id": "00000000-0000-0000-0000-000000000000", "format": {
        "provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
        "partitionColumns": [], "configuration": configuration, "createdTime": 0}}


def test_writer_refuses_deletion_vectors(spark, tmp_path: Path) -> None:
    path = tmp_path / "dv"
    _log(path, {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                             "readerFeatures": ["deletionVectors"],
                             "writerFeatures": ["deletionVectors"]}},
         _metadata({"delta.enableDeletionVectors": "true"}))
    # read_delta reads such tables (delta-spark; tests/spark/test_delta_spark_reads.py)
    with pytest.raises(UnsupportedTableError, match="deletion vectors"):
        write_delta(spark.createDataFrame([(1,)], "x long"), str(path))


def test_range_reader_refuses_column_mapping(spark, tmp_path: Path) -> None:
    path = tmp_path / "cm"
    _log(path, {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
         _metadata({"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "1"},
                   {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1a2b"}))
    with pytest.raises(UnsupportedTableError, match="column mapping"):
        read_changes(spark, str(path), -1)


def test_reads_partition_values_from_the_log_for_non_hive_layouts(spark, tmp_path: Path) -> None:
    """Files under random prefixes (as Delta Spark writes with randomized prefixes) and a
    directory name that disagrees with the log: the log's partition values win."""
    path = tmp_path / "foreign"
    files = {"ab/f1.parquet": ("2024-01-01", [1, 2]), "cd/f2.parquet": (None, [3]),
             "day=2024-01-05/f3.parquet": ("2024-01-04", [4])}
    adds = []
    for rel, (day, xs) in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"x": pa.array(xs, pa.int64())}), path / rel)
        adds.append(AddAction(rel, (path / rel).stat().st_size, {"day": day}, 0, True,
                              json.dumps({"numRecords": len(xs)})))
    schema = Schema.from_json(json.dumps({"type": "struct", "fields": [
        {"name": "x", "type": "long", "nullable": True, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {}}]}))
    create_table_with_add_actions(str(path), schema, adds, partition_by=["day"])
    got = sorted((r.x, r.day) for r in read_delta(spark, str(path)).collect())
    assert got == [(1, dt.date(2024, 1, 1)), (2, dt.date(2024, 1, 1)), (3, None),
                   (4, dt.date(2024, 1, 4))]
    assert sorted(r.x for r in read_delta(spark, str(path), partitions={"day": ["2024-01-04"]})
                  .collect()) == [4]
    assert sorted(r.x for r in read_changes(spark, str(path), -1).collect()) == [1, 2, 3, 4]
