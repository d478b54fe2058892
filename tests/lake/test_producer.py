"""`append_rows`: a producer's rows from the driver land as one delta-rs commit each, in a
table that reads back through Spark as if Spark had written it (the replays land this way)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.lake import producer
from joins.lake.write import NEW_TABLE_PROPERTIES

pytestmark = pytest.mark.spark

SCHEMA = ("key string, value string, ts long, event_date date, score double, flag boolean, "
          "field struct<kind:string,num:double,int:bigint,text:string,key:string>")
ROWS = [("a", '{"x": 1}', 1_700_000_000_000, dt.date(2023, 11, 14), 1.5, True,
         ("int", 1.0, 1, None, "1")),
        (None, None, -1, dt.date(1969, 12, 31), None, None, None)]


def test_rows_land_as_one_commit_each_and_read_back_through_spark(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "source")
    producer.append_rows(spark, path, [], SCHEMA, partition_by=["event_date"])
    assert lake.delta_version(path) == 0
    assert lake.table_properties(path).items() >= NEW_TABLE_PROPERTIES.items()
    # The table's columns are the ones Spark's DDL gives, as a Spark write would declare them.
    assert lake.table_schema(path) == spark.createDataFrame([], SCHEMA).schema

    producer.append_rows(spark, path, ROWS[:1], SCHEMA, partition_by=["event_date"])
    producer.append_rows(spark, path, ROWS[1:], SCHEMA, partition_by=["event_date"])
    producer.append_rows(spark, path, [], SCHEMA, partition_by=["event_date"])   # no commit
    assert lake.delta_version(path) == 2
    read = lake.read_delta(spark, path).select(*spark.createDataFrame([], SCHEMA).columns)
    assert sorted((tuple(r) for r in read.collect()), key=repr) == sorted(
        (tuple(r) for r in spark.createDataFrame(ROWS, SCHEMA).collect()), key=repr)
    # Partitioned by the event day, as the join reads a stream source's new rows.
    days = {r.event_date for r in lake.read_changes(spark, path, 0, 2).select("event_date").collect()}
    assert days == {dt.date(2023, 11, 14), dt.date(1969, 12, 31)}


def test_more_rows_than_a_small_commit_holds_go_through_spark(spark: Any, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(producer, "MAX_ROWS", 1)
    monkeypatch.setattr(producer, "write_arrow", _refuse)
    path = str(tmp_path / "big")
    producer.append_rows(spark, path, ROWS, SCHEMA)
    assert lake.read_delta(spark, path).count() == 2


def test_a_row_of_the_wrong_shape_is_refused_before_anything_is_written(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "bad")
    with pytest.raises(ValueError):
        producer.append_rows(spark, path, [("only", "two")], SCHEMA)
    assert not lake.table_exists(path)


def _refuse(*_args: Any, **_kwargs: Any) -> None:
    raise AssertionError("a large append went through delta-rs")
