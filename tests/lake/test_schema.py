"""Write planning and partition values, without Spark: the rules a write is checked against."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as T

from joins.lake import LakeError, SchemaMismatchError
from joins.lake.schema import (
    as_nullable,
    parse_partition_dirs,
    parse_partition_value,
    partition_value_string,
    plan_write,
    unescape_path_name,
)

TABLE = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("name", T.StringType()),
    T.StructField("event_date", T.DateType()),
])


def plan(data: T.StructType, table: T.StructType | None = TABLE, parts: list[str] | None = None,
         **kw):
    kw.setdefault("partition_by", None)
    kw.setdefault("schema_mode", "enforce")
    return plan_write(data, table, parts if parts is not None else ["event_date"], table="t", **kw)


def test_new_table_is_nullable_and_keeps_data_order() -> None:
    data = T.StructType([T.StructField("b", T.IntegerType(), False),
                         T.StructField("a", T.ArrayType(T.StringType(), False), False)])
    p = plan_write(data, None, None, partition_by=None, schema_mode="enforce", table="t")
    assert p.creates and p.columns == ["b", "a"]
    assert p.schema == T.StructType([T.StructField("b", T.IntegerType(), True),
                                     T.StructField("a", T.ArrayType(T.StringType(), True), True)])


def test_type_mismatch_names_column_and_both_types() -> None:
    data = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("name", T.StringType()),
                         T.StructField("event_date", T.DateType())])
    with pytest.raises(SchemaMismatchError) as err:
        plan(data)
    assert err.value.column == "id"
    assert "'id'" in str(err.value) and "int" in str(err.value) and "bigint" in str(err.value)
    assert (err.value.table_type, err.value.data_type) == ("bigint", "int")


def test_nullability_alone_is_no_mismatch() -> None:
    data = T.StructType([T.StructField("id", T.LongType(), False),
                         T.StructField("event_date", T.DateType(), False)])
    p = plan(data)
    assert p.columns == ["id", "event_date"] and not p.new_columns


def test_extra_column_refused_in_enforce_added_in_merge() -> None:
    data = T.StructType([*TABLE.fields, T.StructField("extra", T.DoubleType(), False)])
    with pytest.raises(SchemaMismatchError, match="'extra'") as err:
        plan(data)
    assert err.value.column == "extra"
    p = plan(data, schema_mode="merge")
    assert p.new_columns == [T.StructField("extra", T.DoubleType(), True)]
    assert p.schema.fieldNames() == ["id", "name", "event_date", "extra"]


def test_case_only_difference_is_refused_even_in_merge() -> None:
    data = T.StructType([T.StructField("ID", T.LongType()), T.StructField("event_date", T.DateType())])
    with pytest.raises(SchemaMismatchError, match="differs only in case"):
        plan(data, schema_mode="merge")


def test_missing_partition_column_and_wrong_partitioning() -> None:
    with pytest.raises(SchemaMismatchError, match="partition column 'event_date'"):
        plan(T.StructType([T.StructField("id", T.LongType())]))
    with pytest.raises(LakeError, match="partitioned by"):
        plan(TABLE, partition_by=["name"])


def test_not_null_table_column_is_guarded_when_data_may_hold_nulls() -> None:
    strict = T.StructType([T.StructField("id", T.LongType(), False),
                           T.StructField("event_date", T.DateType())])
    assert plan(T.StructType([T.StructField("id", T.LongType(), True),
                              T.StructField("event_date", T.DateType())]), strict).not_null == ["id"]
    assert plan(T.StructType([T.StructField("id", T.LongType(), False),
                              T.StructField("event_date", T.DateType())]), strict).not_null == []
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        plan(T.StructType([T.StructField("event_date", T.DateType())]), strict)


@pytest.mark.parametrize("bad", [T.NullType(), T.DayTimeIntervalType(),
                                 T.ArrayType(T.CalendarIntervalType())])
def test_types_delta_cannot_store(bad: T.DataType) -> None:
    data = T.StructType([T.StructField("x", bad), T.StructField("y", T.LongType())])
    with pytest.raises(SchemaMismatchError, match="'x'"):
        plan_write(data, None, None, partition_by=None, schema_mode="enforce", table="t")


def test_partition_column_types_and_names() -> None:
    data = T.StructType([T.StructField("ts", T.TimestampType()), T.StructField("v", T.LongType())])
    with pytest.raises(SchemaMismatchError, match="partition column 'ts' has type timestamp"):
        plan_write(data, None, None, partition_by=["ts"], schema_mode="enforce", table="t")
    with pytest.raises(SchemaMismatchError, match="'nope'"):
        plan_write(data, None, None, partition_by=["nope"], schema_mode="enforce", table="t")
    with pytest.raises(LakeError, match="every column"):
        plan_write(T.StructType([T.StructField("v", T.LongType())]), None, None,
                   partition_by=["v"], schema_mode="enforce", table="t")


def test_colliding_names_refused() -> None:
    data = T.StructType([T.StructField("a", T.LongType()), T.StructField("A", T.LongType())])
    with pytest.raises(SchemaMismatchError, match="collide"):
        plan_write(data, None, None, partition_by=None, schema_mode="enforce", table="t")


def test_as_nullable_is_deep() -> None:
    nested = T.MapType(T.StringType(), T.StructType([T.StructField("x", T.LongType(), False)]), False)
    assert as_nullable(nested) == T.MapType(
        T.StringType(), T.StructType([T.StructField("x", T.LongType(), True)]), True)


# --- partition values ---------------------------------------------------------------------

# Spark's (Hive's) escapePathName: these characters become %XX in a partition directory name.
_SPARK_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(1, 32)}


def spark_escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPED else c for c in value)


@given(st.text(min_size=1))
def test_unescape_inverts_spark_escaping(value: str) -> None:
    assert unescape_path_name(spark_escape(value)) == value


@given(st.lists(st.tuples(st.text(st.characters(codec="utf-8"), min_size=1),
                          st.one_of(st.none(), st.text(min_size=1))), min_size=1, max_size=3))
def test_partition_dirs_round_trip(pairs: list[tuple[str, str | None]]) -> None:
    path = "/".join(f"{spark_escape(k)}="
                    f"{'__HIVE_DEFAULT_PARTITION__' if v is None else spark_escape(v)}"
                    for k, v in pairs)
    assert parse_partition_dirs(path) == pairs


def test_partition_dirs_reject_foreign_layouts() -> None:
    assert parse_partition_dirs("") == []
    assert parse_partition_dirs("ab12/event_date=2024-01-01") is None
    assert parse_partition_dirs("=x") is None


@given(st.one_of(
    st.tuples(st.just(T.DateType()), st.dates()),
    st.tuples(st.just(T.LongType()), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just(T.IntegerType()), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just(T.BooleanType()), st.booleans()),
    st.tuples(st.just(T.StringType()), st.text()),
))
def test_partition_value_string_round_trips(case: tuple[T.DataType, object]) -> None:
    data_type, value = case
    text = partition_value_string(data_type, value)
    assert text is not None
    assert parse_partition_value(data_type, text) == value
    # the string form of a value selects the same partition as the value itself
    assert partition_value_string(data_type, text) == text


def test_partition_value_string_rejects_misfits() -> None:
    with pytest.raises(ValueError):
        partition_value_string(T.DateType(), "2024-13-01")
    with pytest.raises(ValueError):
        partition_value_string(T.DateType(), dt.datetime(2024, 1, 1))
    with pytest.raises(ValueError):
        partition_value_string(T.LongType(), 1.5)
    with pytest.raises(ValueError):
        partition_value_string(T.StringType(), 5)
    assert partition_value_string(T.DateType(), "2024-01-01") == "2024-01-01"
    assert partition_value_string(T.DateType(), dt.date(2024, 1, 1)) == "2024-01-01"


def test_parse_partition_value_types() -> None:
    assert parse_partition_value(T.TimestampType(), "2024-01-01 10:00:00") == dt.datetime(
        2024, 1, 1, 10, tzinfo=dt.UTC)
    assert parse_partition_value(T.TimestampNTZType(), "2024-01-01T10:00:00") == dt.datetime(
        2024, 1, 1, 10)
    assert parse_partition_value(T.LongType(), "") is None
    assert parse_partition_value(T.StringType(), "") == ""
    assert parse_partition_value(T.StringType(), None) is None
