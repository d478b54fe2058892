"""write_delta / read_delta against Spark, read back with delta-rs and polars as independent
Delta readers."""

from __future__ import annotations

import datetime as dt
import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from joins.lake import (
    AppTxn,
    CommitInfo,
    LakeError,
    SchemaMismatchError,
    delta_version,
    read_delta,
    table_exists,
    table_schema,
    txn_version,
    vacuum_orphans,
    write_delta,
)
from tests.lake.conftest import events, files_on_disk, rows_of

pytestmark = pytest.mark.spark

ROWS = [
    (1, "ann", 1.5, "2024-01-01", "2024-01-01T10:00:00.123456"),
    (2, None, None, "2024-01-01", None),
    (3, "bob", -2.0, "2024-01-02", "2024-01-02T23:59:59"),
    (4, "zoë/ä:b", 0.0, "2024-01-03", "2024-01-03T00:00:00"),
]


def add_actions(path: str) -> dict[str, dict[str, Any]]:
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    return {row["path"]: row for row in actions.to_pylist()}


def utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def canonical(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = []
    for r in records:
        out.append(tuple(utc(v) if isinstance(v, dt.datetime) else v for v in r.values()))
    return sorted(out, key=repr)


def spark_records(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


def test_create_append_and_read_back_with_three_readers(spark, table: str) -> None:
    df = events(spark, ROWS)
    info = write_delta(df, table, partition_by=["event_date"])
    assert info == CommitInfo(version=0, skipped=False, files=3, rows=4)
    assert table_exists(table) and delta_version(table) == 0
    expected = canonical(spark_records(df))

    assert canonical(spark_records(read_delta(spark, table))) == expected
    assert canonical(DeltaTable(table).to_pyarrow_table().to_pylist()) == expected
    frame = pl.read_delta(table).select(["id", "name", "amount", "event_date", "ts"])
    assert canonical(frame.to_dicts()) == expected

    info = write_delta(events(spark, ROWS[:1]), table)
    assert (info.version, info.files, info.rows) == (1, 1, 1)
    assert read_delta(spark, table).count() == 5
    assert DeltaTable(table).to_pyarrow_table().num_rows == 5


def test_schema_and_types_of_a_partitioned_table(spark, table: str) -> None:
    schema = T.StructType([
        T.StructField("v", T.LongType()), T.StructField("price", T.DecimalType(10, 2)),
        T.StructField("flag", T.BooleanType()), T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("local", T.TimestampNTZType()),
        T.StructField("event_date", T.DateType()), T.StructField("region", T.StringType()),
        T.StructField("bucket", T.IntegerType()),
    ])
    rows = [
        (1, Decimal("1.25"), True, ["a"], dt.datetime(2024, 1, 1, 8), dt.date(2024, 1, 1), "eu", 3),
        (2, None, None, None, None, dt.date(2024, 1, 2), "a/b:c d=e%", None),
        (3, Decimal("-7.00"), False, [], dt.datetime(2024, 1, 2), None, None, -1),
    ]
    df = spark.createDataFrame(rows, schema)
    write_delta(df, table, partition_by=["event_date", "region", "bucket"])
    back = read_delta(spark, table)
    assert back.schema == schema
    assert rows_of(back) == rows_of(df)
    assert table_schema(table) == schema
    by_id = {r["v"]: r for r in DeltaTable(table).to_pyarrow_table().to_pylist()}
    assert by_id[2]["region"] == "a/b:c d=e%" and by_id[2]["bucket"] is None
    assert by_id[3]["event_date"] is None and by_id[1]["event_date"] == dt.date(2024, 1, 1)
    # column subset and partition pruning
    assert rows_of(read_delta(spark, table, columns=["bucket", "v"])) == \
        sorted([(3, 1), (None, 2), (-1, 3)], key=repr)
    only = read_delta(spark, table, partitions={"region": ["eu", "a/b:c d=e%"]}, columns=["v"])
    assert sorted(r.v for r in only.collect()) == [1, 2]
    with pytest.raises(LakeError, match="not in the table"):
        read_delta(spark, table, columns=["nope"])


def test_overwrite_replaces_everything(spark, table: str) -> None:
    write_delta(events(spark, ROWS), table, partition_by=["event_date"])
    info = write_delta(events(spark, ROWS[2:3]), table, mode="overwrite")
    assert info.version == 1
    assert [r.id for r in read_delta(spark, table).collect()] == [3]
    assert [r["id"] for r in DeltaTable(table).to_pyarrow_table().to_pylist()] == [3]
    assert read_delta(spark, table, version=0).count() == 4


def test_overwrite_of_partitions_touches_only_those(spark, table: str) -> None:
    write_delta(events(spark, ROWS), table, partition_by=["event_date"])
    before = add_actions(table)
    replacement = events(spark, [(10, "new", 9.0, "2024-01-01", None),
                                 (11, "new", 9.0, "2024-01-03", None)])
    info = write_delta(replacement, table, mode="overwrite",
                       replace_partitions={"event_date": ["2024-01-01", dt.date(2024, 1, 3)]})
    assert (info.version, info.files, info.rows) == (1, 2, 2)
    after = add_actions(table)
    untouched = {p: a for p, a in before.items() if p.startswith("event_date=2024-01-02/")}
    assert len(untouched) == 1
    assert {p: a for p, a in after.items() if p in untouched} == untouched
    assert not set(before) - set(untouched) & set(after)
    assert sorted(r.id for r in read_delta(spark, table).collect()) == [3, 10, 11]


def test_overwrite_of_partitions_refuses_rows_outside_them(spark, table: str) -> None:
    write_delta(events(spark, ROWS), table, partition_by=["event_date"])
    disk = files_on_disk(table)
    with pytest.raises(LakeError, match="outside replace_partitions"):
        write_delta(events(spark, [(10, "x", 1.0, "2024-01-05", None)]), table, mode="overwrite",
                    replace_partitions={"event_date": ["2024-01-01"]})
    assert delta_version(table) == 0 and files_on_disk(table) == disk
    with pytest.raises(LakeError, match="not a partition column"):
        write_delta(events(spark, ROWS), table, mode="overwrite", replace_partitions={"id": [1]})
    with pytest.raises(LakeError, match="needs mode='overwrite'"):
        write_delta(events(spark, ROWS), table, replace_partitions={"event_date": ["2024-01-01"]})


def test_time_travel_by_version_and_timestamp(spark, table: str) -> None:
    for i in range(3):
        write_delta(events(spark, [(i, f"v{i}", float(i), "2024-01-01", None)]), table)
        time.sleep(0.3)
    history = {h["version"]: h["timestamp"] for h in DeltaTable(table).history()}
    for version in range(3):
        assert sorted(r.id for r in read_delta(spark, table, version=version).collect()) == \
            list(range(version + 1))

    def at(ms: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)

    middle = at((history[1] + history[2]) // 2)
    assert sorted(r.id for r in read_delta(spark, table, timestamp=middle).collect()) == [0, 1]
    naive = middle.replace(tzinfo=None)  # naive means UTC
    assert read_delta(spark, table, timestamp=naive).count() == 2
    assert read_delta(spark, table, timestamp=middle.isoformat()).count() == 2
    assert read_delta(spark, table, timestamp=at(history[2] + 10_000)).count() == 3
    with pytest.raises(LakeError):
        read_delta(spark, table, timestamp=at(history[0] - 60_000))
    with pytest.raises(LakeError, match="does not exist"):
        read_delta(spark, table, version=7)
    with pytest.raises(LakeError, match="not both"):
        read_delta(spark, table, version=0, timestamp=middle)


def test_replayed_app_transaction_writes_nothing(spark, table: str) -> None:
    df = events(spark, ROWS)
    first = write_delta(df, table, partition_by=["event_date"], app_txn=AppTxn("ingest", 7))
    assert not first.skipped and txn_version(table, "ingest") == 7
    disk = files_on_disk(table)
    for replay in (AppTxn("ingest", 7), AppTxn("ingest", 3)):
        info = write_delta(df, table, app_txn=replay)
        assert info == CommitInfo(version=None, skipped=True, files=0, rows=0)
        assert files_on_disk(table) == disk and delta_version(table) == 0
    nxt = write_delta(df, table, app_txn=AppTxn("ingest", 8))
    assert nxt.version == 1 and txn_version(table, "ingest") == 8
    assert txn_version(table, "other") is None
    # transactions are table state: an overwrite keeps them
    write_delta(df, table, mode="overwrite")
    assert txn_version(table, "ingest") == 8
    assert write_delta(df, table, app_txn=AppTxn("ingest", 8)).skipped


def test_empty_writes_create_and_commit(spark, table: str) -> None:
    empty = events(spark, []).filter(F.lit(False))
    info = write_delta(empty, table, partition_by=["event_date"], app_txn=AppTxn("a", 0))
    assert info == CommitInfo(version=0, skipped=False, files=0, rows=0)
    back = read_delta(spark, table)
    assert back.count() == 0 and back.schema == events(spark, []).schema
    assert DeltaTable(table).to_pyarrow_table().num_rows == 0
    # an empty batch still records its transaction: replays of it are skipped
    assert txn_version(table, "a") == 0
    unpartitioned = str(Path(table).parent / "flat")
    assert write_delta(empty.drop("event_date"), unpartitioned).files == 0
    assert read_delta(spark, unpartitioned).count() == 0


def test_schema_enforcement_and_merge(spark, table: str) -> None:
    write_delta(events(spark, ROWS), table, partition_by=["event_date"])
    with pytest.raises(SchemaMismatchError) as err:
        write_delta(events(spark, ROWS).withColumn("amount", F.col("amount").cast("string")), table)
    message = str(err.value)
    assert "'amount'" in message and "string" in message and "double" in message
    with pytest.raises(SchemaMismatchError, match="'extra'"):
        write_delta(events(spark, ROWS).withColumn("extra", F.lit(1)), table)
    assert delta_version(table) == 0

    widened = events(spark, ROWS[:1]).withColumn("extra", F.lit(1))
    write_delta(widened, table, schema_mode="merge")
    back = read_delta(spark, table)
    assert back.schema["extra"].dataType == T.IntegerType()
    assert sorted(((r.id, r.extra) for r in back.collect()), key=repr) == \
        [(1, 1), (1, None), (2, None), (3, None), (4, None)]
    assert sorted(r["extra"] is None for r in DeltaTable(table).to_pyarrow_table().to_pylist()) == \
        [False, True, True, True, True]
    # a column the data lacks is written as nulls
    write_delta(events(spark, ROWS[:1]).drop("name"), table)
    assert read_delta(spark, table).filter("name IS NULL").count() == 2


def test_not_null_columns_are_checked_in_the_tasks(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "strict")
    strict = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("v", T.LongType())])
    DeltaTable.create(path, schema=_delta_schema(strict))
    write_delta(spark.createDataFrame([(1, 2)], "id long, v long"), path)
    with pytest.raises(Exception, match="NOT NULL"):
        write_delta(spark.createDataFrame([(None, 2)], "id long, v long"), path)
    assert delta_version(path) == 1
    # The tasks write into the table: a failed job leaves its finished tasks' files (and a
    # failed task's own cleanup may still be under way), for vacuum_orphans.
    vacuum_orphans(path, older_than=dt.timedelta(0))
    # (Hadoop's checksum file beside each file delta-spark's tasks write is not data.)
    assert {f for f in files_on_disk(path) if not f.endswith(".crc")} == set(add_actions(path))


def _delta_schema(schema: T.StructType) -> Any:
    from deltalake import Schema
    return Schema.from_json(schema.json())


def test_stats_in_the_log(spark, table: str) -> None:
    write_delta(events(spark, ROWS).coalesce(1), table)
    (action,) = add_actions(table).values()
    assert action["num_records"] == 4
    assert action["min.id"] == 1 and action["max.id"] == 4
    assert action["null_count.name"] == 1 and action["null_count.ts"] == 1
    assert action["min.event_date"] == dt.date(2024, 1, 1)
    log = (Path(table) / "_delta_log" / "00000000000000000000.json").read_text()
    stats = json.loads(next(json.loads(line)["add"]["stats"] for line in log.splitlines()
                            if '"add"' in line))
    assert stats["maxValues"]["ts"] == "2024-01-03T00:00:00.000Z"
    assert stats["minValues"]["ts"] == "2024-01-01T10:00:00.123Z"


def test_write_never_collects_the_data(spark, table: str, monkeypatch) -> None:
    from pyspark.sql import DataFrame as Base
    from pyspark.sql.classic.dataframe import DataFrame as Classic

    df = events(spark, ROWS)
    existing = events(spark, ROWS[:1])

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the write path pulled rows to the driver")

    for cls in (Base, Classic):
        for name in ("collect", "toPandas", "toArrow", "toLocalIterator", "take", "head", "first",
                     "tail", "count", "foreach", "foreachPartition"):
            if hasattr(cls, name):
                monkeypatch.setattr(cls, name, refuse)
    write_delta(existing, table, partition_by=["event_date"])
    days = ["2024-01-01", "2024-01-02", "2024-01-03"]
    info = write_delta(df, table, mode="overwrite", replace_partitions={"event_date": days},
                       app_txn=AppTxn("x", 1))
    assert info.rows == 4
    monkeypatch.undo()
    assert read_delta(spark, table).count() == 4


def test_overwrite_from_its_own_snapshot(spark, table: str) -> None:
    write_delta(events(spark, ROWS), table, partition_by=["event_date"])
    doubled = read_delta(spark, table).withColumn("amount", F.col("amount") * 2)
    write_delta(doubled, table, mode="overwrite")
    assert sorted((r.id, r.amount) for r in read_delta(spark, table).collect()) == \
        [(1, 3.0), (2, None), (3, -4.0), (4, 0.0)]


def test_missing_table_and_bad_arguments(spark, table: str) -> None:
    assert not table_exists(table) and delta_version(table) is None
    assert txn_version(table, "a") is None
    with pytest.raises(LakeError, match="no Delta table"):
        read_delta(spark, table)
    with pytest.raises(LakeError, match="mode"):
        write_delta(events(spark, ROWS), table, mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(LakeError, match="schema_mode"):
        write_delta(events(spark, ROWS), table, schema_mode="loose")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        AppTxn("", 1)
    with pytest.raises(ValueError):
        AppTxn("a", -1)
    write_delta(events(spark, ROWS), table, partition_by=["event_date"])
    with pytest.raises(LakeError, match="partitioned by"):
        write_delta(events(spark, ROWS), table, partition_by=["name"])
