"""The "index" strategy: the table becomes a version index in the JVM (temporaljoins.AsOfJoin,
joins/spark/jvm), sorted by (key, ts) and broadcast; each stream partition answers its rows by
binary search where they lie. Its shuffle form ("index_shuffle", temporaljoins.ShuffledAsOf) is
for a table too large to broadcast: both sides partitioned on the key, an index per partition.
The fastest strategies by far (bench/asof_join.py), with the same answers as the SQL plans by the
same rules: the index applies tombstones and the retention bound.

Columns are passed by position and read in the JVM (integer ts as is, timestamps as their
microseconds): no projection in front of either side. Integer keys are the index's keys; any
other key (a string, a composite key's struct) is hashed to 64 bits on both sides, carried along
with each version and compared on every answer, so a hash shared with a stream key absent from
the table never answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins.asof.errors import duplicate_version, engine_error, jvm_template, null_ts
from joins.asof.plan import RESERVED_PREFIX, AsOfPlan, saturate
from joins.spark.exprs import ident

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

_HASHED = f"{RESERVED_PREFIX}hashed_key"
_KEY_COPY = f"{RESERVED_PREFIX}key"


def index_unusable(plan: AsOfPlan, stream: DataFrame, table: StructType) -> str | None:
    """Why the JVM index cannot run this join (`table`: the table's schema), or None when it can."""
    from joins.spark import jvm

    if not plan.integral_keys:
        stream_key = stream.schema[plan.lookup_key].dataType.simpleString()
        table_key = table[plan.table_key].dataType.simpleString()
        if stream_key != table_key:
            # Other keys are hashed, and equal values of different types hash differently.
            return f"the stream key is {stream_key} and the table key {table_key}"
        if any(t in table_key for t in ("float", "double", "map<")):
            # -0.0 = 0.0 and NaN = NaN in joins but not in a hash; maps have no hash at all.
            return f"the index cannot hash keys of type {table_key}"
    stream_type = stream.schema[plan.stream_ts].dataType.typeName()
    table_type = table[plan.table_ts].dataType.typeName()
    if plan.ts_kind == "timestamp" and stream_type != table_type:
        # timestamp vs timestamp_ntz compare through the session time zone; the SQL plans do that.
        return f"the stream ts is {stream_type} and the table ts {table_type}"
    return jvm.unavailable_reason(stream.sparkSession)


def _with_hash(df: DataFrame, col: str) -> DataFrame:
    c = ident(col)
    return df.selectExpr("*", f"CASE WHEN {c} IS NULL THEN NULL ELSE xxhash64({c}) END AS {_HASHED}")


@dataclass(frozen=True)
class IndexLayout:
    """Where the index reads a (hashed, where the keys are not integers) table frame: the
    positional arguments every JVM index build takes."""

    key: int
    ts: int
    tombstone: int
    value_ords: list[int]
    value_names: list[str]
    key_check_field: int  # -1, or the value field holding the key itself (hashed keys)

    def args(self) -> tuple[Any, ...]:
        return (self.key, self.ts, self.tombstone, self.value_ords, self.value_names)


def prepared_table(plan: AsOfPlan, table: DataFrame) -> DataFrame:
    """The table frame as the index reads it: with the key's hash where keys are not integers."""
    return table if plan.integral_keys else _with_hash(table, plan.table_key)


def prepared_schema(plan: AsOfPlan, table: StructType) -> StructType:
    """The schema of `prepared_table` of a table with schema `table`."""
    from pyspark.sql import types as T

    if plan.integral_keys:
        return table
    return T.StructType([*table.fields, T.StructField(_HASHED, T.LongType())])


def index_layout(plan: AsOfPlan, table_cols: list[str]) -> IndexLayout:
    """The layout of a `prepared_table` with columns `table_cols`."""
    value_ords = [table_cols.index(c) for c in plan.value_cols]
    value_names = list(plan.value_cols)
    if plan.valid_from_col is not None:
        value_ords.append(table_cols.index(plan.table_ts))
        value_names.append(plan.valid_from_col)
    key_check_field = -1
    if not plan.integral_keys:
        key_check_field = len(value_ords)
        value_ords.append(table_cols.index(plan.table_key))
        value_names.append(_KEY_COPY)
    index_key = _HASHED if not plan.integral_keys else plan.table_key
    return IndexLayout(table_cols.index(index_key), table_cols.index(plan.table_ts),
                       table_cols.index(plan.tombstone_col) if plan.tombstone_col else -1,
                       value_ords, value_names, key_check_field)


def bounds(plan: AsOfPlan) -> tuple[bool, int, bool, int]:
    """(has retention, retention, has stream time, stream time) in the table ts's units."""
    unit, retention, stream_time = plan.time_unit, plan.history_retention_ms, plan.table_stream_time
    return (retention is not None, saturate((retention or 0) * unit),
            stream_time is not None, saturate((stream_time or 0) * unit))


def built(build: Callable[[], Any]) -> Any:
    """build() (a JVM index build), its failures as the engine's errors."""
    try:
        return build()
    except Exception as exc:
        error = engine_error(exc)
        if error is exc:
            raise
        raise error from None


def index_join(plan: AsOfPlan, stream: DataFrame, table: DataFrame) -> DataFrame:
    """The join through the index: the table is indexed now (one Spark job) and broadcast; the
    probe stays lazy. A bad table record fails here, as InputRecordError; a hash collision as
    HashCollision (the caller then uses a SQL plan)."""
    from joins.spark import jvm

    table = prepared_table(plan, table)
    layout = index_layout(plan, table.columns)
    entry = jvm.entry(stream.sparkSession)
    index = built(lambda: entry.index(
        table._jdf, *layout.args(), *bounds(plan), jvm_template(null_ts(plan, "table")),
        jvm_template(duplicate_version(plan)), layout.key_check_field))
    return probe(plan, stream, index, layout)


@dataclass(frozen=True)
class _StreamSide:
    """The stream as the probe reads it (with the key's hash where keys are not integers) and
    where: the column probed, the ts, and the key itself that a hashed key's answers are checked
    against (-1: integer keys)."""

    frame: DataFrame
    key: str
    key_ord: int
    ts_ord: int
    key_check_ord: int


def _stream_side(plan: AsOfPlan, stream: DataFrame) -> _StreamSide:
    if not plan.integral_keys:
        stream = _with_hash(stream, plan.lookup_key)
    key = plan.lookup_key if plan.integral_keys else _HASHED
    cols = stream.columns
    return _StreamSide(stream, key, cols.index(key), cols.index(plan.stream_ts),
                      -1 if plan.integral_keys else cols.index(plan.lookup_key))


def _visible(plan: AsOfPlan, joined: DataFrame) -> DataFrame:
    """The joined frame without the index's hidden columns."""
    return joined if plan.integral_keys else joined.drop(_HASHED, _KEY_COPY)


def shuffled_index_join(plan: AsOfPlan, stream: DataFrame, table: DataFrame,
                        partitions: int) -> DataFrame:
    """The join through per-partition indexes (temporaljoins.ShuffledAsOf): both sides
    hash-partitioned on the key into `partitions`, each task indexing its share of the table. For
    tables too large to broadcast. A bad table record, or two keys sharing a hash, fails the action
    that runs the result (run it under `joins.asof.input_errors()` for InputRecordError)."""
    from pyspark.sql import DataFrame as _DataFrame
    from pyspark.sql import functions as F

    from joins.spark import jvm

    spark = stream.sparkSession
    table = prepared_table(plan, table)
    layout = index_layout(plan, table.columns)
    side = _stream_side(plan, stream)
    # One type on both sides: an int key and a long key of one value hash to different partitions.
    shuffled = side.frame.repartition(partitions, F.col(ident(side.key)).cast("long"))
    table = table.repartition(partitions, F.col(ident(table.columns[layout.key])).cast("long"))
    joined = _DataFrame(built(lambda: jvm.shuffled_entry(spark).join(
        shuffled._jdf, side.key_ord, side.ts_ord, table._jdf, *layout.args(), *bounds(plan),
        plan.how == "left", jvm_template(null_ts(plan, "stream")), jvm_template(null_ts(plan, "table")),
        jvm_template(duplicate_version(plan)), side.key_check_ord, layout.key_check_field)), spark)
    return _visible(plan, joined)


def probe(plan: AsOfPlan, stream: DataFrame, index: Any, layout: IndexLayout, *,
          held: bool = False) -> DataFrame:
    """Every stream row answered by `index` (a broadcast VersionIndex, or with `held` an
    IndexCache.Held), lazily."""
    from pyspark.sql import DataFrame as _DataFrame

    from joins.spark import jvm

    side = _stream_side(plan, stream)
    entry = jvm.entry(stream.sparkSession)
    joined = _DataFrame((entry.probeHeld if held else entry.probe)(
        side.frame._jdf, side.key_ord, side.ts_ord, index, plan.how == "left",
        jvm_template(null_ts(plan, "stream")), side.key_check_ord, layout.key_check_field),
        stream.sparkSession)
    return _visible(plan, joined)
