"""Delta statistics from Parquet footers: every bound must contain every value (a reader skips
files on these bounds, so a bound that is too tight loses rows)."""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as T

from joins.lake.stats import STRING_PREFIX_LENGTH, footer_stats

SCHEMA = T.StructType([
    T.StructField("n", T.LongType()),
    T.StructField("x", T.DoubleType()),
    T.StructField("s", T.StringType()),
    T.StructField("d", T.DateType()),
    T.StructField("ts", T.TimestampType()),
    T.StructField("b", T.BooleanType()),
])
ARROW = pa.schema([("n", pa.int64()), ("x", pa.float64()), ("s", pa.string()),
                   ("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("b", pa.bool_())])

_row = st.fixed_dictionaries({
    "n": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    "x": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
    # short strings and strings around the truncation length
    "s": st.one_of(st.none(), st.text(max_size=6),
                   st.text(min_size=STRING_PREFIX_LENGTH - 2, max_size=STRING_PREFIX_LENGTH + 3)),
    "d": st.one_of(st.none(), st.dates()),
    "ts": st.one_of(st.none(), st.datetimes(min_value=dt.datetime(1970, 1, 1),
                                            max_value=dt.datetime(2200, 1, 1),
                                            timezones=st.just(dt.UTC))),
    "b": st.one_of(st.none(), st.booleans()),
})


def footer(rows: list[dict[str, Any]], row_group_size: int) -> pq.FileMetaData:
    table = pa.Table.from_pylist(rows, schema=ARROW)
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata


def typed(column: str, value: Any) -> Any:
    if column == "d":
        return dt.date.fromisoformat(value)
    if column == "ts":
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


@given(st.lists(_row, min_size=1, max_size=30), st.integers(1, 8))
def test_bounds_contain_every_value_and_counts_are_exact(rows: list[dict[str, Any]],
                                                         group: int) -> None:
    num, text = footer_stats(footer(rows, group), SCHEMA)
    stats = json.loads(text)
    assert num == stats["numRecords"] == len(rows)
    for column in ("n", "x", "s", "d", "ts", "b"):
        values = [r[column] for r in rows if r[column] is not None]
        assert stats["nullCount"][column] == len(rows) - len(values)
        lo, hi = stats["minValues"].get(column), stats["maxValues"].get(column)
        if lo is not None:
            assert all(typed(column, lo) <= v for v in values), column
        if hi is not None:
            assert all(v <= typed(column, hi) for v in values), column
        if column in ("n", "d") and values:
            # exact types get exact bounds (not merely valid ones)
            assert (typed(column, lo), typed(column, hi)) == (min(values), max(values))
    assert "b" not in stats["minValues"]


def test_timestamp_bounds_round_outwards_to_milliseconds() -> None:
    rows = [{"ts": dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=dt.UTC)},
            {"ts": dt.datetime(2024, 1, 1, 0, 0, 0, 2001, tzinfo=dt.UTC)}]
    stats = json.loads(footer_stats(footer(rows, 10), SCHEMA)[1])
    assert stats["minValues"]["ts"] == "2024-01-01T00:00:00.001Z"
    assert stats["maxValues"]["ts"] == "2024-01-01T00:00:00.003Z"


def test_long_strings_keep_a_prefix_lower_bound_and_no_upper_bound() -> None:
    long = "z" * (STRING_PREFIX_LENGTH + 5)
    stats = json.loads(footer_stats(footer([{"s": "b" * 40}, {"s": long}], 10), SCHEMA)[1])
    assert stats["minValues"]["s"] == "b" * STRING_PREFIX_LENGTH
    assert "s" not in stats["maxValues"]


def test_all_null_column_has_null_count_but_no_bounds() -> None:
    stats = json.loads(footer_stats(footer([{"n": None}, {"n": None}], 1), SCHEMA)[1])
    assert stats["nullCount"]["n"] == 2
    assert "n" not in stats["minValues"] and "n" not in stats["maxValues"]


def test_nested_columns_are_skipped() -> None:
    schema = T.StructType([T.StructField("p", T.StructType([T.StructField("q", T.LongType())])),
                           T.StructField("n", T.LongType())])
    table = pa.table({"p": [{"q": 1}, {"q": 2}], "n": [5, 6]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    stats = json.loads(footer_stats(pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata, schema)[1])
    assert stats["minValues"] == {"n": 5} and stats["maxValues"] == {"n": 6}
    assert stats["nullCount"] == {"n": 0}


def test_a_string_bound_that_is_not_utf8_is_omitted_not_an_error() -> None:
    from pyspark.sql import types as T

    from joins.lake.stats import _bound

    assert _bound(T.StringType(), b"\xff\xfe", upper=True) is None
    assert _bound(T.StringType(), b"abc", upper=False) == "abc"
