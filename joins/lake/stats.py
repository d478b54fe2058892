"""Delta file statistics (numRecords, minValues, maxValues, nullCount) from a Parquet footer.

Only the footer is read: row-group statistics already hold what Delta wants, so the driver
never touches data pages. Statistics are optional per column in Delta, so any doubt (a row
group without stats, a non-finite float, a long string) drops that column's bound rather than
risking a wrong one: a reader skipping a file on a wrong bound would lose rows.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import types as T

# Delta Spark truncates string statistics to 32 characters; a truncated prefix is still a valid
# lower bound, but not an upper bound.
STRING_PREFIX_LENGTH = 32

_MIN_MAX_TYPES: tuple[type[T.DataType], ...] = (
    T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
    T.StringType, T.DateType, T.TimestampType, T.TimestampNTZType,
)


def footer_stats(metadata: pq.FileMetaData, schema: T.StructType) -> tuple[int, str]:
    """(numRecords, stats JSON) for a file whose top-level columns are typed by `schema`."""
    types = {f.name: f.dataType for f in schema.fields}
    leaves = _top_level_leaves(metadata, types)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, index in leaves.items():
        lo, hi, null_count = _column_stats(metadata, index)
        if null_count is not None:
            nulls[name] = null_count
        data_type = types[name]
        if not isinstance(data_type, _MIN_MAX_TYPES) or lo is None or hi is None:
            continue
        lo_json, hi_json = _bound(data_type, lo, upper=False), _bound(data_type, hi, upper=True)
        if lo_json is not None:
            mins[name] = lo_json
        if hi_json is not None:
            maxs[name] = hi_json
    stats: dict[str, Any] = {"numRecords": metadata.num_rows, "minValues": mins,
                             "maxValues": maxs, "nullCount": nulls}
    return metadata.num_rows, json.dumps(stats, separators=(",", ":"))


def _top_level_leaves(metadata: pq.FileMetaData, types: dict[str, T.DataType]) -> dict[str, int]:
    """Column index of each top-level primitive column the table knows (nested leaves and
    repeated fields carry no Delta statistics here)."""
    out: dict[str, int] = {}
    schema = metadata.schema
    for i in range(metadata.num_columns):
        column = schema.column(i)
        if column.max_repetition_level != 0 or column.max_definition_level > 1:
            continue
        name = column.path
        if name in types and not isinstance(types[name], (T.StructType, T.ArrayType, T.MapType)):
            out[name] = i
    return out


def _column_stats(metadata: pq.FileMetaData, index: int) -> tuple[Any, Any, int | None]:
    lo: Any = None
    hi: Any = None
    nulls: int | None = 0
    has_bounds = True
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        if group.num_rows == 0:
            continue
        stats = group.column(index).statistics
        if stats is None:
            return None, None, None
        if nulls is not None:
            nulls = nulls + stats.null_count if stats.has_null_count else None
        if stats.has_min_max and has_bounds:
            try:
                group_lo, group_hi = stats.min, stats.max
            except UnicodeDecodeError:
                # A writer may truncate a string bound mid-character; no bound is always safe.
                has_bounds = False
                continue
            lo = group_lo if lo is None else min(lo, group_lo)
            hi = group_hi if hi is None else max(hi, group_hi)
        elif stats.null_count != group.num_rows:
            # A group with values but no bounds: any bound we give could exclude its rows.
            has_bounds = False
    if not has_bounds:
        return None, None, nulls
    return lo, hi, nulls


def _bound(data_type: T.DataType, value: Any, *, upper: bool) -> Any:
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return value if isinstance(value, float) and math.isfinite(value) else None
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return int(value)
    if isinstance(data_type, T.StringType):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8", errors="strict")
            except UnicodeDecodeError:
                return None  # statistics are optional: omit a bound we cannot state exactly
        if len(value) <= STRING_PREFIX_LENGTH:
            return value
        return None if upper else value[:STRING_PREFIX_LENGTH]
    if isinstance(data_type, T.DateType):
        return value.isoformat() if isinstance(value, dt.date) else None
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        if not isinstance(value, dt.datetime):
            return None
        return _timestamp_bound(value, upper=upper, utc=isinstance(data_type, T.TimestampType))
    return None


def _timestamp_bound(value: dt.datetime, *, upper: bool, utc: bool) -> str:
    """Millisecond precision, as Delta Spark writes: floor a lower bound, ceil an upper one so
    the rounded bound still contains the true one."""
    if utc and value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    value = value.replace(tzinfo=None)
    micros = value.microsecond % 1000
    if micros:
        value = value - dt.timedelta(microseconds=micros)
        if upper:
            value = value + dt.timedelta(milliseconds=1)
    text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    return text + "Z" if utc else text
