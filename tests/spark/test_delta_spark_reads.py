"""Tables as Spark users make them, built with delta-spark itself (DELETE / UPDATE / MERGE with
deletion vectors, renamed and dropped columns under column mapping, checkpoints, the change data
feed), read back by `joins.lake` and checked row for row against what the SQL did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.lake.feed import CHANGE_TYPE, COMMIT_VERSION, DELETE, INSERT, UPDATE

pytestmark = pytest.mark.spark


def _sql(spark: Any, path: Path, statement: str) -> None:
    spark.sql(statement.replace("{t}", f"delta.`{path}`"))


def _rows(frame: Any, *columns: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in frame.collect())


def _log_actions(path: Path) -> list[dict[str, Any]]:
    out = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        out += [json.loads(line) for line in commit.read_text().splitlines() if line]
    return out


def _create(spark: Any, path: Path, properties: str) -> None:
    _sql(spark, path, "CREATE TABLE {t} (id BIGINT, name STRING, amount BIGINT) USING delta "
                      f"TBLPROPERTIES ({properties})")
    _sql(spark, path, "INSERT INTO {t} VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), "
                      "(4, 'd', 40), (5, 'e', 50)")


def test_deletion_vectors_from_delete_update_and_merge(spark, tmp_path: Path) -> None:
    path = tmp_path / "dv"
    _create(spark, path, "'delta.enableDeletionVectors' = 'true'")
    _sql(spark, path, "DELETE FROM {t} WHERE id = 2")                              # v2
    _sql(spark, path, "UPDATE {t} SET amount = amount + 1 WHERE id = 3")           # v3
    spark.createDataFrame([(4, "D", 400), (6, "f", 60)], "id long, name string, amount long") \
        .createOrReplaceTempView("tj_updates")
    _sql(spark, path, "MERGE INTO {t} AS t USING tj_updates AS u ON t.id = u.id "   # v4
                      "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    # The table is what this test claims: rows deleted by vectors, not by rewritten files.
    assert any((a.get("add") or {}).get("deletionVector") for a in _log_actions(path))

    assert _rows(lake.read_delta(spark, path), "id", "name", "amount") == [
        (1, "a", 10), (3, "c", 31), (4, "D", 400), (5, "e", 50), (6, "f", 60)]
    assert _rows(lake.read_delta(spark, path, version=2), "id", "amount") == [
        (1, 10), (3, 30), (4, 40), (5, 50)]
    assert _rows(lake.read_delta(spark, path, version=3, columns=["amount"]), "amount") == [
        (10,), (31,), (40,), (50,)]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_renamed_and_dropped_columns(spark, tmp_path: Path, mode: str) -> None:
    path = tmp_path / f"cm_{mode}"
    _create(spark, path, f"'delta.columnMapping.mode' = '{mode}', "
                         "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5'")
    _sql(spark, path, "ALTER TABLE {t} RENAME COLUMN amount TO total")             # v2
    _sql(spark, path, "ALTER TABLE {t} DROP COLUMN name")                          # v3
    _sql(spark, path, "INSERT INTO {t} VALUES (6, 60)")                            # v4
    _sql(spark, path, "ALTER TABLE {t} ADD COLUMN name STRING")                     # v5: a new 'name'
    _sql(spark, path, "INSERT INTO {t} VALUES (7, 70, 'g')")                       # v6

    latest = lake.read_delta(spark, path)
    assert latest.columns == ["id", "total", "name"]
    assert _rows(latest, "id", "total", "name") == [
        (1, 10, None), (2, 20, None), (3, 30, None), (4, 40, None), (5, 50, None), (6, 60, None),
        (7, 70, "g")]   # the dropped column's values do not come back under the new one
    assert _rows(lake.read_delta(spark, path, version=1), "id", "name", "amount") == [
        (1, "a", 10), (2, "b", 20), (3, "c", 30), (4, "d", 40), (5, "e", 50)]


def test_checkpoints_and_partitions(spark, tmp_path: Path) -> None:
    path = tmp_path / "cp"
    _sql(spark, path, "CREATE TABLE {t} (id BIGINT, day DATE) USING delta PARTITIONED BY (day) "
                      "TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    for i in range(1, 6):
        _sql(spark, path, f"INSERT INTO {{t}} VALUES ({i}, DATE'2024-03-0{1 + i % 2}')")
    assert list((path / "_delta_log").glob("*.checkpoint.parquet"))
    for version in range(6):
        assert _rows(lake.read_delta(spark, path, version=version), "id") == [
            (i,) for i in range(1, version + 1)]
    import datetime as dt

    odd = lake.read_delta(spark, path, partitions={"day": [dt.date(2024, 3, 2)]})
    assert _rows(odd, "id") == [(1,), (3,), (5,)]


def test_change_data_feed_keeps_new_states_and_deletes(spark, tmp_path: Path) -> None:
    path = tmp_path / "cdf"
    _create(spark, path, "'delta.enableChangeDataFeed' = 'true', "
                         "'delta.enableDeletionVectors' = 'true'")            # v0 create, v1 insert
    _sql(spark, path, "UPDATE {t} SET amount = 21 WHERE id = 2")             # v2
    _sql(spark, path, "DELETE FROM {t} WHERE id IN (3, 4)")                 # v3
    _sql(spark, path, "INSERT INTO {t} VALUES (6, 'f', 60)")                 # v4

    feed = lake.read_change_feed(spark, path, 1)
    assert _rows(feed, COMMIT_VERSION, CHANGE_TYPE, "id", "amount") == [
        (2, UPDATE, 2, 21), (3, DELETE, 3, 30), (3, DELETE, 4, 40), (4, INSERT, 6, 60)]
    assert _rows(lake.read_change_feed(spark, path, 0, 1), CHANGE_TYPE, "id") == [
        (INSERT, i) for i in range(1, 6)]
    assert lake.read_change_feed(spark, path, 4).count() == 0


def test_change_data_feed_refusals_name_the_version(spark, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    _create(spark, plain, "'delta.appendOnly' = 'false'")
    with pytest.raises(lake.LakeError, match="version 1 was committed without the change data feed"):
        lake.read_change_feed(spark, plain, 0)

    renamed = tmp_path / "renamed"
    _create(spark, renamed, "'delta.enableChangeDataFeed' = 'true', "
                            "'delta.columnMapping.mode' = 'name'")
    _sql(spark, renamed, "ALTER TABLE {t} RENAME COLUMN amount TO total")
    with pytest.raises(lake.LakeError, match="version 2 changed the table's columns"):
        lake.read_change_feed(spark, renamed, 0)
    assert _rows(lake.read_change_feed(spark, renamed, 1), CHANGE_TYPE) == []
