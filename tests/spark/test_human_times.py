"""Times as people read them (issue 25, point 3): the SQL spelling in quarantine reasons equals
`joins.core.human.iso_time`, whatever the session's time zone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.core.human import duration, iso_time
from joins.spark.exprs import duration_sql, expired_reason_sql, iso_time_sql
from tests.budget import spark_examples

pytestmark = pytest.mark.spark

# Year 1 to 9999: what Spark's timestamps hold.
EPOCH_MS = st.integers(-62_135_596_800_000, 253_402_300_799_999)


def test_iso_time_and_duration_in_python() -> None:
    assert iso_time(0) == "1970-01-01T00:00:00Z"
    assert iso_time(1_709_423_917_750) == "2024-03-02T23:58:37.750Z"
    assert iso_time(-1) == "1969-12-31T23:59:59.999Z"
    assert [duration(ms) for ms in (1_800_000, 86_400_000, 194_400_000, 1_500, 0, -60_000)] == [
        "30 min", "1 day", "2 days 6 h", "1 s 500 ms", "0 ms", "-1 min"]


@spark_examples(3)
@given(values=st.lists(EPOCH_MS, min_size=1, max_size=40))
def test_sql_spelling_equals_pythons_in_any_session_zone(spark: Any, values: list[int]) -> None:
    frame = spark.createDataFrame([(v,) for v in values], "x long")
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")   # DST, west of UTC
    try:
        got = [r[0] for r in frame.selectExpr(iso_time_sql("x")).collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)
    assert got == [iso_time(v) for v in values]


def test_the_expired_reason_reads_in_times_and_a_duration(spark: Any) -> None:
    [row] = spark.sql(f"SELECT {expired_reason_sql('1709253000000', '1709423917750', 86_400_000)}"
                      " AS r").collect()
    assert row["r"] == ("expired: ts 2024-03-01T00:30:00Z < stream time 2024-03-02T23:58:37.750Z"
                        " - history retention 1 day = 2024-03-01T23:58:37.750Z; not stored")


@spark_examples(3)
@given(values=st.lists(st.integers(-10 * 86_400_000 * 365, 10 * 86_400_000 * 365) | st.sampled_from(
    [0, 1, 999, 1_000, 60_000, 3_600_000, 86_400_000, 172_800_000, 194_400_000]), min_size=1,
    max_size=40))
def test_sql_duration_equals_pythons(spark: Any, values: list[int]) -> None:
    frame = spark.createDataFrame([(v,) for v in values], "x long")
    got = [r[0] for r in frame.selectExpr(duration_sql("x")).collect()]
    assert got == [duration(v) for v in values]


def test_the_interval_joins_late_reason_reads_in_times_and_a_duration(spark: Any) -> None:
    from joins.operators.interval_join.classify import late_reason_column
    from joins.operators.interval_join.spec import late_reason

    expected = ("late left row: orders.ts 2024-03-01T14:21:39.512Z is below its watermark "
                "2024-03-02T23:18:28.151Z (by 1 day 8 h 56 min 48 s 639 ms)")
    assert late_reason("left", "orders.ts", 1709302899512, 1709421508151) == expected
    frame = spark.createDataFrame([(1709302899512,)], "t long")
    [row] = frame.select(late_reason_column("left", "orders.ts", "t", "1709421508151")).collect()
    assert row[0] == expected


def test_outputs_carry_a_timestamp_beside_each_event_time(spark: Any) -> None:
    from joins.spark.exprs import with_utc_times

    frame = spark.createDataFrame([("a", 1709253000000, 1709253000500, None, 5)],
                                  "k string, ts long, table_valid_from long, valid_to long, "
                                  "_wm_ts long")
    out = with_utc_times(frame)
    assert out.columns == ["k", "ts", "ts_utc", "table_valid_from", "table_valid_from_utc",
                           "valid_to", "valid_to_utc", "_wm_ts"]
    assert dict(out.dtypes)["ts_utc"] == "timestamp"
    [row] = out.selectExpr("unix_millis(ts_utc) AS a", "unix_millis(table_valid_from_utc) AS b",
                           "valid_to_utc").collect()
    assert (row["a"], row["b"], row["valid_to_utc"]) == (1709253000000, 1709253000500, None)
    assert with_utc_times(out).columns == out.columns   # a frame read back keeps its twins


@spark_examples(3)
@given(values=st.lists(EPOCH_MS, min_size=1, max_size=40))
def test_the_spark_event_date_is_joins_core_time_event_day(spark: Any, values: list[int]) -> None:
    from pyspark.sql import functions as F

    from joins.core.time import event_day
    from joins.spark.exprs import event_date

    frame = spark.createDataFrame([(v,) for v in values], "x long")
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        got = [r[0].isoformat() for r in frame.select(event_date(F.col("x"))).collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)
    assert got == [event_day(v) for v in values]
