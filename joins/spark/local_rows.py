"""Rows the driver holds, as a frame Spark plans as a local relation.

PySpark's `createDataFrame(list, schema)` on a classic session does not make a local relation:
it parallelizes the pickled rows and maps them through Python (`RDD._reserialize`), so every
job that reads the frame starts Python worker tasks to unpickle them again, one per partition.
Measured warm on this machine: a two-row frame built and collected in 110-120 ms that way,
in 10-16 ms as a local relation. A micro-batch builds several such frames (a side without new
rows, the watermark rows it emits, the blocks of a stream-time prefix), and each job that
reads one paid the round trip, and the suite's Python workers about 14 % of its CPU.

`local_rows` sends the rows as Arrow, which PySpark turns into a `LocalRelation` (up to
`spark.sql.execution.arrow.localRelationThreshold`, 48 MB by default; an RDD of Arrow batches
above that, still without Python workers), and an empty frame as an empty `LocalRelation`
(two py4j calls). A Spark Connect client already sends local rows as a local relation.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from joins.spark.connect import is_connect

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def local_rows(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str | StructType
               ) -> DataFrame:
    """`rows` (tuples in the order of `schema`'s fields: a Spark DDL string or a StructType) as
    a frame over a local relation; values as `createDataFrame` takes them."""
    if is_connect(spark):
        return spark.createDataFrame(list(rows), schema)
    from pyspark.sql import DataFrame

    struct = schema if not isinstance(schema, str) else struct_of(spark, schema)
    if rows and _has_timestamps(struct):
        # PySpark reads a naive datetime in the Python process's time zone, Arrow as UTC: the
        # engine's own frames carry times as longs, so only a caller's rows come this way.
        return spark.createDataFrame(list(rows), struct)
    if not rows:
        from joins.spark.names import jvm_class

        jvm, jsession = spark._jvm, spark._jsparkSession
        assert jvm is not None
        empty = jvm_class(jvm, "java.util.ArrayList")()
        jdf = jsession.createDataFrame(empty, _java_struct(spark, struct.json()))
        return DataFrame(jdf, spark)
    return spark.createDataFrame(arrow_table(rows, struct), struct)


def arrow_table(rows: Sequence[Sequence[Any]], struct: StructType) -> pa.Table:
    """`rows` as an Arrow table of the types Spark writes `struct` as."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(struct)
    width = len(arrow)
    bad = next((r for r in rows if len(r) != width), None)
    if bad is not None:
        raise ValueError(f"a row has {len(bad)} values for the {width} fields {struct.names}: {bad!r}")
    columns = list(zip(*rows, strict=True)) if rows else [()] * width
    arrays = []
    for values, field in zip(columns, arrow, strict=True):
        try:
            arrays.append(pa.array(list(values), type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ValueError(f"field {field.name!r} ({field.type}): {exc}") from None
    return pa.Table.from_arrays(arrays, schema=arrow)


def _has_timestamps(struct: StructType) -> bool:
    from pyspark.sql.types import TimestampType

    return any(isinstance(f.dataType, TimestampType) for f in struct.fields)


def struct_of(spark: SparkSession, ddl: str) -> StructType:
    """The StructType of a Spark DDL string (`a long, b string`), parsed by the session's JVM
    once per string."""
    return _parsed(ddl)


@functools.lru_cache(maxsize=256)
def _parsed(ddl: str) -> StructType:
    from pyspark.sql.types import StructType, _parse_datatype_string

    parsed = _parse_datatype_string(ddl)
    assert isinstance(parsed, StructType), ddl
    return parsed


def _java_struct(spark: SparkSession, json: str) -> Any:
    # One JVM StructType per schema and session: the engine's empty frames have a few schemas.
    cache: dict[str, Any] | None = getattr(spark, "_tj_java_structs", None)
    if cache is None:
        cache = {}
        spark._tj_java_structs = cache  # type: ignore[attr-defined]
    if json not in cache:
        cache[json] = spark._jsparkSession.parseDataType(json)
    return cache[json]
