"""Schemas and partition values: Spark types against Delta's, and the checks a write needs.

Delta serialises a table schema in Spark's own JSON schema format, so conversion is a JSON
round trip. Everything here is plain Python over `pyspark.sql.types` (no JVM), so the write
planning rules are testable without a SparkSession.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pyspark.sql import types as T

from joins.lake.errors import LakeError, SchemaMismatchError

SchemaMode = Literal["enforce", "merge"]
WriteMode = Literal["append", "overwrite"]

_ATOMIC: tuple[type[T.DataType], ...] = (
    T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType,
    T.DoubleType, T.DecimalType, T.StringType, T.BinaryType, T.DateType, T.TimestampType,
    T.TimestampNTZType,
)
# Partition values travel as directory names and as strings in the log; these types round-trip
# exactly through both (Spark's own partition discovery parses them back identically).
PARTITION_TYPES: tuple[type[T.DataType], ...] = (
    T.StringType, T.DateType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType,
)
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def spark_schema_from_delta_json(schema_json: str) -> T.StructType:
    return T.StructType.fromJson(json.loads(schema_json))


def as_nullable(data_type: T.DataType) -> T.DataType:
    """The type with every nullability flag set and field metadata dropped: what a Delta table
    created from the data declares (Delta makes new tables' columns nullable), and the form in
    which two types are compared."""
    if isinstance(data_type, T.StructType):
        return T.StructType([T.StructField(f.name, as_nullable(f.dataType), True)
                             for f in data_type.fields])
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(as_nullable(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(as_nullable(data_type.keyType), as_nullable(data_type.valueType), True)
    return data_type


def _unsupported_type(data_type: T.DataType) -> T.DataType | None:
    """The first nested type Delta cannot store, if any."""
    if isinstance(data_type, T.StructType):
        for f in data_type.fields:
            bad = _unsupported_type(f.dataType)
            if bad is not None:
                return bad
        return None
    if isinstance(data_type, T.ArrayType):
        return _unsupported_type(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _unsupported_type(data_type.keyType) or _unsupported_type(data_type.valueType)
    return None if isinstance(data_type, _ATOMIC) else data_type


def check_storable(schema: T.StructType, table: str) -> None:
    for f in schema.fields:
        bad = _unsupported_type(f.dataType)
        if bad is not None:
            raise SchemaMismatchError(
                f"{table}: column '{f.name}' has type {f.dataType.simpleString()}, which a Delta "
                f"table cannot store ({bad.simpleString()}); cast it first",
                column=f.name, data_type=f.dataType.simpleString())


@dataclass(frozen=True)
class WritePlan:
    """How a DataFrame maps onto the table.

    schema: the table schema after the write (new columns appended in merge mode).
    partition_by: the table's partition columns.
    columns: data columns to write, in table order (new columns last).
    new_columns: columns merge mode adds to the table.
    not_null: columns the table declares NOT NULL that the data may still fill with nulls;
        the write checks them row by row in the Spark tasks.
    creates: the write creates the table.
    """

    schema: T.StructType
    partition_by: list[str]
    columns: list[str]
    new_columns: list[T.StructField] = field(default_factory=list)
    not_null: list[str] = field(default_factory=list)
    creates: bool = False


def plan_write(data: T.StructType, table_schema: T.StructType | None,
               table_partition_by: list[str] | None, *, partition_by: list[str] | None,
               schema_mode: SchemaMode, table: str) -> WritePlan:
    """Check the data against the table (or against what a new table may hold) and decide the
    columns to write. Raises SchemaMismatchError naming the column and both types."""
    _check_unique_names(data, table)
    check_storable(data, table)
    if table_schema is None:
        parts = list(partition_by or [])
        _check_partition_columns(data, parts, table)
        schema = T.StructType([T.StructField(f.name, as_nullable(f.dataType), True)
                               for f in data.fields])
        return WritePlan(schema=schema, partition_by=parts, columns=data.fieldNames(),
                         creates=True)

    parts = list(table_partition_by or [])
    if partition_by is not None and list(partition_by) != parts:
        raise LakeError(f"{table}: partition_by={list(partition_by)} but the table is "
                        f"partitioned by {parts}; the partitioning of an existing table is fixed")
    by_name = {f.name: f for f in table_schema.fields}
    by_lower = {f.name.lower(): f for f in table_schema.fields}
    new_columns: list[T.StructField] = []
    for f in data.fields:
        existing = by_name.get(f.name)
        if existing is None:
            twin = by_lower.get(f.name.lower())
            if twin is not None:
                raise SchemaMismatchError(
                    f"{table}: column '{f.name}' differs only in case from table column "
                    f"'{twin.name}'; rename it to match",
                    column=f.name, table_type=twin.dataType.simpleString(),
                    data_type=f.dataType.simpleString())
            if schema_mode != "merge":
                raise SchemaMismatchError(
                    f"{table}: column '{f.name}' ({f.dataType.simpleString()}) is not in the "
                    f"table schema; pass schema_mode='merge' to add it as a nullable column",
                    column=f.name, data_type=f.dataType.simpleString())
            new_columns.append(T.StructField(f.name, as_nullable(f.dataType), True))
            continue
        if as_nullable(existing.dataType) != as_nullable(f.dataType):
            raise SchemaMismatchError(
                f"{table}: column '{f.name}' has type {f.dataType.simpleString()} in the data but "
                f"{existing.dataType.simpleString()} in the table",
                column=f.name, table_type=existing.dataType.simpleString(),
                data_type=f.dataType.simpleString())
    present = set(data.fieldNames())
    not_null: list[str] = []
    for f in table_schema.fields:
        if f.name in present:
            if not f.nullable and data[f.name].nullable:
                not_null.append(f.name)
        elif f.name in parts:
            raise SchemaMismatchError(
                f"{table}: partition column '{f.name}' ({f.dataType.simpleString()}) is missing "
                "from the data", column=f.name, table_type=f.dataType.simpleString())
        elif not f.nullable:
            raise SchemaMismatchError(
                f"{table}: column '{f.name}' is NOT NULL in the table but missing from the data",
                column=f.name, table_type=f.dataType.simpleString())
    schema = T.StructType(list(table_schema.fields) + new_columns)
    columns = [f.name for f in table_schema.fields if f.name in present] + \
        [f.name for f in new_columns]
    return WritePlan(schema=schema, partition_by=parts, columns=columns,
                     new_columns=new_columns, not_null=not_null)


def _check_unique_names(data: T.StructType, table: str) -> None:
    seen: dict[str, str] = {}
    for name in data.fieldNames():
        other = seen.get(name.lower())
        if other is not None:
            raise SchemaMismatchError(
                f"{table}: columns '{other}' and '{name}' collide (Delta column names are case "
                "insensitive)", column=name)
        seen[name.lower()] = name


def _check_partition_columns(data: T.StructType, parts: list[str], table: str) -> None:
    if len(set(parts)) != len(parts):
        raise LakeError(f"{table}: partition_by={parts} names a column twice")
    names = set(data.fieldNames())
    for p in parts:
        if p not in names:
            raise SchemaMismatchError(f"{table}: partition column '{p}' is not in the data",
                                      column=p)
        ptype = data[p].dataType
        if not isinstance(ptype, PARTITION_TYPES):
            raise SchemaMismatchError(
                f"{table}: partition column '{p}' has type {ptype.simpleString()}; partition by "
                "string, date, boolean or an integral type (derive e.g. event_date from a "
                "timestamp)", column=p, data_type=ptype.simpleString())
    if parts and len(parts) == len(data.fields):
        raise LakeError(f"{table}: every column is a partition column; keep at least one data "
                        "column")


# --- partition values ---------------------------------------------------------------------

_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def unescape_path_name(name: str) -> str:
    """Spark's (Hive's) unescaping of a partition directory value: %XX becomes the character."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)


def parse_partition_dirs(relative_dir: str) -> list[tuple[str, str | None]] | None:
    """`a=1/b=x%3Ay` -> [("a", "1"), ("b", "x:y")]; None if a segment is not `name=value`.
    Values are Delta's partition value strings; a null partition comes back as None."""
    if not relative_dir:
        return []
    out: list[tuple[str, str | None]] = []
    for segment in relative_dir.split("/"):
        name, sep, value = segment.partition("=")
        if not sep or not name:
            return None
        raw = unescape_path_name(value)
        out.append((unescape_path_name(name), None if raw == _HIVE_NULL else raw))
    return out


def parse_partition_value(data_type: T.DataType, value: str | None) -> Any:
    """A Delta partition value string as the Python value Spark would produce for the column.
    Raises ValueError when the string does not parse."""
    if value is None:
        return None
    if isinstance(data_type, T.StringType):
        return value
    if value == "":
        return None
    if isinstance(data_type, _INTEGRAL):
        return int(value)
    if isinstance(data_type, T.BooleanType):
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"not a boolean: {value!r}")
        return lowered == "true"
    if isinstance(data_type, T.DateType):
        return dt.date.fromisoformat(value)
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return float(value)
    if isinstance(data_type, T.DecimalType):
        try:
            return Decimal(value)
        except InvalidOperation as exc:
            raise ValueError(f"not a decimal: {value!r}") from exc
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if isinstance(data_type, T.TimestampType):
            return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed
        return parsed.replace(tzinfo=None)
    if isinstance(data_type, T.BinaryType):
        return value.encode()
    raise ValueError(f"unsupported partition type {data_type.simpleString()}")


def partition_value_string(data_type: T.DataType, value: Any) -> str | None:
    """A user-given partition value (Python value or its string) in Delta's string form, so
    that `"2024-01-01"` and `date(2024, 1, 1)` select the same partition. ValueError if the
    value does not fit the column type."""
    if value is None:
        return None
    if isinstance(data_type, T.StringType):
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {value!r}")
        return value
    if isinstance(data_type, T.BooleanType):
        if isinstance(value, bool):
            return "true" if value else "false"
        parsed = parse_partition_value(data_type, str(value))
        return "true" if parsed else "false"
    if isinstance(data_type, _INTEGRAL):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"expected an integer, got {value!r}")
        return str(int(value))
    if isinstance(data_type, T.DateType):
        if isinstance(value, dt.datetime):
            raise ValueError(f"expected a date, got the datetime {value!r}")
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, str):
            return dt.date.fromisoformat(value).isoformat()
        raise ValueError(f"expected a date, got {value!r}")
    raise ValueError(f"unsupported partition type {data_type.simpleString()}")
