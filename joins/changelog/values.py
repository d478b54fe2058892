"""How the Spark table operators read a value: its columns, and one field of it as a FIELD
struct that carries the field's JSON kind, so that predicates, group keys and contributions
follow the reference engine's JSON rules (`joins.core.fields`, `joins.core.keys`).

    FIELD = struct(kind, num, int, text, key)
      kind  missing | null | bool | int | float | string | object | array
      num   a number as double (int and float)       int   an int exactly (kind int)
      text  a string's value, "true"/"false", or an object/array in its equality spelling
            (numbers by value: JSON equality says 1 == 1.0 inside objects too)
      key   the canonical JSON (`joins.core.keys`: 1 and 1.0 are two group keys)

Two value models: `JsonValues` (a replay: the value as canonical JSON text in one column,
each configured path landed as a FIELD column by `json_field`), `TypedValues` (the lake: typed
value columns, a path names a column; a missing field cannot occur).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins.core.fields import MISSING, canonical_json, is_number, read_path

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

FIELD_TYPE = "struct<kind:string,num:double,int:bigint,text:string,key:string>"


def _equality_form(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _equality_form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_equality_form(v) for v in value]
    return float(value) if is_number(value) else value


def equality_text(value: Any) -> str:
    """An object's or array's spelling under JSON equality (numbers as floats)."""
    return json.dumps(_equality_form(value), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)


def json_field(value: Any, path: str | None) -> tuple[Any, ...]:
    """The FIELD row of `value` at `path` (None = the whole value); a tombstone reads null."""
    part = MISSING if value is None and path is not None else read_path(value, path)
    if part is MISSING:
        return ("missing", None, None, None, None)
    key = canonical_json(part)
    if part is None:
        return ("null", None, None, None, key)
    if isinstance(part, bool):
        return ("bool", None, None, key, key)
    if isinstance(part, int):
        return ("int", float(part), part if -(1 << 63) <= part < (1 << 63) else None, None, key)
    if isinstance(part, float):
        return ("float", part, None, None, key)
    if isinstance(part, str):
        return ("string", None, None, part, key)
    return ("object" if isinstance(part, dict) else "array", None, None, equality_text(part), key)


def field_column(index: int) -> str:
    return f"_field_{index}"


@dataclass(frozen=True)
class JsonValues:
    """A replay's values: `value` (canonical JSON text), and one landed FIELD column per path."""

    paths: tuple[str | None, ...] = ()
    value_columns: tuple[str, ...] = ("value",)

    def field(self, path: str | None) -> Column:
        from pyspark.sql import functions as F

        return F.col(field_column(self.paths.index(path)))

    def land_columns(self, value: Any) -> tuple[tuple[Any, ...], ...]:
        return tuple(json_field(value, p) for p in self.paths)


@dataclass(frozen=True)
class TypedValues:
    """The lake's values: typed columns; a path is a column name (None: the whole value)."""

    value_columns: tuple[str, ...]
    types: dict[str, DataType]

    def field(self, path: str | None) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        if path is None:
            whole = F.to_json(F.struct(*(F.col(c) for c in self.value_columns)))
            return F.struct(F.lit("object").alias("kind"), F.lit(None).cast("double").alias("num"),
                            F.lit(None).cast("bigint").alias("int"), whole.alias("text"),
                            whole.alias("key"))
        c, dtype = F.col(path), self.types[path]
        integral = isinstance(dtype, T.IntegralType)
        numeric = isinstance(dtype, T.NumericType)
        kind = ("int" if integral else "float" if numeric else
                "bool" if isinstance(dtype, T.BooleanType) else "string")
        text = (F.when(c, F.lit("true")).otherwise(F.lit("false")) if kind == "bool"
                else c.cast("string") if kind == "string" else F.lit(None).cast("string"))
        return F.struct(F.when(c.isNull(), F.lit("null")).otherwise(F.lit(kind)).alias("kind"),
                        (c.cast("double") if numeric else F.lit(None).cast("double")).alias("num"),
                        (c.cast("bigint") if integral else F.lit(None).cast("bigint")).alias("int"),
                        text.alias("text"), c.cast("string").alias("key"))


def key_order(key: Column, *, json_keys: bool) -> Column:
    """The order of input keys in a concat (the reference's `key_order`): numbers numerically,
    then strings, then other keys by their canonical JSON; `json_keys`: keys are key texts."""
    from pyspark.sql import functions as F

    if not json_keys:
        return F.struct(F.lit(0).alias("rank"), key.alias("v"))
    first = F.substring(key, 1, 1)
    rank = (F.when(first == F.lit('"'), F.lit(1))
            .when(first.rlike("^[-0-9]$"), F.lit(0)).otherwise(F.lit(2)))
    text = F.get_json_object(F.concat(F.lit('{"k":'), key, F.lit("}")), "$.k")
    return F.struct(rank.alias("rank"), F.when(rank == 0, key.cast("double")).alias("num"),
                    F.when(rank == 1, text).alias("str"), key.alias("spelling"))


def value_struct(schema: StructType, columns: tuple[str, ...]) -> StructType:
    """The struct of a table's value columns as state holds them: every field nullable (a
    tombstone's value is all nulls)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(c, schema[c].dataType, True) for c in columns])
