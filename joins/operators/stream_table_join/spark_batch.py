"""Batch as-of (temporal) join of a stream against a versioned table, on Spark.

Semantics: the versioned store's get(key, stream ts) of seed 000 (KIP-914), applied to every
stream row at once. For each stream row, the table version of the same key with the largest
ts <= the stream ts answers (an equal ts counts); a tombstone version reads as null; with
history retention, a stream ts older than table stream time - history retention is answered
only by the key's latest version (it never expires), else null. An inner join drops stream rows
without an answer, a left join keeps them with null table columns. The table must hold at most
one row per (key, ts), which the versioned ingest guarantees (a same-ts put replaces); a
duplicate fails the query rather than doubling output rows.

Three strategies with the same answers (docs/asof_join.md):

- "index" (what "auto" picks for a table that fits in memory): the table becomes
  a version index in the JVM (joins/spark/jvm), sorted by (key, ts) and broadcast; each stream
  partition answers its rows by binary search where they lie. The fastest by far, see
  bench/asof_join.py.
- "broadcast" / "shuffle": pure Spark SQL, for keys the index cannot take (floating point), for
  sessions without the JVM helper (Spark Connect, no JDK) and for tables too big to broadcast.

The SQL plans ("bucketed validity intervals"):

1. Table side. Every version gets its validity interval [valid_from, valid_to), valid_to being
   the key's next version ts (a window `lead` over the table only, the small side). Per key, the
   span [min ts, max ts] is cut into ceil(versions / versions_per_bucket) equal-width time
   buckets, so a hot key gets proportionally more, finer buckets. Each version is copied into
   every bucket its interval overlaps: that carries the previous version into a bucket where no
   version starts. Total rows <= versions + buckets.
2. Stream side. Each row computes its key's bucket for its ts with integer arithmetic (clamped
   to the key's first / last bucket) and equi-joins on (key, bucket) under the condition
   valid_from <= ts < valid_to. Exactly one interval contains ts, so the join output IS the
   answer: no window, no aggregation and no sort on the stream side.

Why it is skew-proof: a stream row examines the intervals of one bucket, about
versions_per_bucket + 1 whatever the size of its key, where an equi-join on the key alone
examines all versions of the key (quadratic on a hot key). With the table broadcast the stream
is never shuffled, so a hot key costs what any key costs; with a shuffle the shuffle key
(key, bucket) spreads a hot key over as many tasks as it has buckets, and Spark's adaptive skew
join splits a stream partition that is still oversized.

The query is generated as one SQL text over two temporary views: building it through the
DataFrame API costs a JVM round trip per expression node, which at a million rows was a sizeable
share of the whole join's time.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

OPERATOR = "stream_table_join (spark batch)"
JoinHow = Literal["inner", "left"]
Strategy = Literal["auto", "index", "broadcast", "shuffle"]
TsKind = Literal["integral", "timestamp"]

DEFAULT_VERSIONS_PER_BUCKET = 2
# Above this estimated table size the auto strategy shuffles instead of broadcasting.
DEFAULT_BROADCAST_MAX_BYTES = 256 * 1024 * 1024
# Internal columns start with this; user columns may not.
RESERVED_PREFIX = "__asof_"


@dataclass(frozen=True)
class _Plan:
    """Validated settings of one as-of join, everything the SQL text is generated from."""

    stream_columns: tuple[str, ...]
    lookup_key: str
    stream_ts: str
    table_key: str
    table_ts: str
    value_cols: tuple[str, ...]
    tombstone_col: str | None
    valid_from_col: str | None
    ts_kind: TsKind
    table_ts_type: str  # Spark SQL type name of table_ts
    how: JoinHow
    versions_per_bucket: int
    history_retention_ms: int | None
    table_stream_time: int | None
    integral_keys: bool  # both keys are integers: the JVM index keys on them as they are


def _config_error(key: str, message: str) -> ConfigError:
    return ConfigError(f"{OPERATOR}: invalid config: {key}: {message}")


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ts_kind(schema: StructType, col: str, key: str) -> TsKind:
    from pyspark.sql.types import (
        ByteType,
        IntegerType,
        LongType,
        ShortType,
        TimestampNTZType,
        TimestampType,
    )

    dtype = schema[col].dataType
    if isinstance(dtype, ByteType | ShortType | IntegerType | LongType):
        return "integral"
    if isinstance(dtype, TimestampType | TimestampNTZType):
        return "timestamp"
    raise _config_error(key, f"column {col!r} must be an integer (epoch ms) or a timestamp, "
                             f"got {dtype.simpleString()}")


def _is_integral(schema: StructType, col: str) -> bool:
    return schema[col].dataType.typeName() in ("byte", "short", "integer", "long")


def _require_column(columns: Sequence[str], col: str, key: str, side: str) -> None:
    if col not in columns:
        raise _config_error(key, f"no column {col!r} in the {side} (columns: {', '.join(columns)})")


def _validate(stream_schema: StructType, table_schema: StructType, *, stream_key: str, stream_ts: str,
              table_key: str, table_ts: str, how: str, table_value_cols: Sequence[str] | None,
              history_retention_ms: int | None, table_stream_time: int | None,
              tombstone_col: str | None, table_key_from: str | None, valid_from_col: str | None,
              versions_per_bucket: int, strategy: str) -> _Plan:
    if how not in ("inner", "left"):
        raise _config_error("how", f"must be 'inner' or 'left', got {how!r}")
    if strategy not in ("auto", "index", "broadcast", "shuffle"):
        raise _config_error("strategy", f"must be 'auto', 'index', 'broadcast' or 'shuffle', got "
                                        f"{strategy!r}")
    if history_retention_ms is not None and history_retention_ms < 0:
        raise _config_error("history_retention_ms", f"must be >= 0, got {history_retention_ms}")
    if table_stream_time is not None and history_retention_ms is None:
        raise _config_error("table_stream_time", "only means something with history_retention_ms")
    if versions_per_bucket < 1:
        raise _config_error("versions_per_bucket", f"must be >= 1, got {versions_per_bucket}")
    stream_cols, table_cols = stream_schema.fieldNames(), table_schema.fieldNames()
    _require_column(stream_cols, stream_key, "stream_key", "stream")
    _require_column(stream_cols, stream_ts, "stream_ts", "stream")
    _require_column(table_cols, table_key, "table_key", "table")
    _require_column(table_cols, table_ts, "table_ts", "table")
    if table_key_from is not None:
        _require_column(stream_cols, table_key_from, "table_key_from", "stream")
    if tombstone_col is not None:
        _require_column(table_cols, tombstone_col, "tombstone_col", "table")
        if table_schema[tombstone_col].dataType.typeName() != "boolean":
            raise _config_error("tombstone_col", f"column {tombstone_col!r} must be boolean")
    lookup_key = table_key_from if table_key_from is not None else stream_key
    integral_keys = (_is_integral(stream_schema, lookup_key) and _is_integral(table_schema, table_key))
    stream_kind = _ts_kind(stream_schema, stream_ts, "stream_ts")
    table_kind = _ts_kind(table_schema, table_ts, "table_ts")
    if stream_kind != table_kind:
        raise _config_error("stream_ts", f"stream ts {stream_ts!r} is {stream_kind} but table ts "
                                         f"{table_ts!r} is {table_kind}; they must compare")
    if table_value_cols is None:
        reserved = {table_key, table_ts, tombstone_col}
        values = tuple(c for c in table_cols if c not in reserved)
    else:
        for col in table_value_cols:
            _require_column(table_cols, col, "table_value_cols", "table")
        values = tuple(table_value_cols)
    out = [*stream_cols, *values, *([valid_from_col] if valid_from_col else [])]
    lowered = [c.lower() for c in out]  # Spark resolves names case-insensitively by default
    clashes = sorted({c for c in out if lowered.count(c.lower()) > 1})
    if clashes:
        raise _config_error("table_value_cols", f"output column(s) {clashes} would appear twice; "
                                                "rename them, or choose table_value_cols / "
                                                "valid_from_col")
    if any(c.startswith(RESERVED_PREFIX) for c in [*out, *table_cols]):
        raise _config_error("table_value_cols", f"column names starting with {RESERVED_PREFIX!r} "
                                                "are reserved")
    return _Plan(
        stream_columns=tuple(stream_cols),
        lookup_key=lookup_key, integral_keys=integral_keys,
        stream_ts=stream_ts, table_key=table_key, table_ts=table_ts, value_cols=values,
        tombstone_col=tombstone_col, valid_from_col=valid_from_col, ts_kind=table_kind,
        table_ts_type=table_schema[table_ts].dataType.simpleString(),
        how=how,  # type: ignore[arg-type]
        versions_per_bucket=versions_per_bucket, history_retention_ms=history_retention_ms,
        table_stream_time=table_stream_time)


# --- SQL generation --------------------------------------------------------------------------

def _ts_long(col_sql: str, plan: _Plan, field: str, side: str) -> str:
    """The ts as a long (epoch ms, or micros for timestamps); a null ts fails the query naming
    the field: it cannot be placed in time, and dropping the row would be silent."""
    as_long = f"CAST({col_sql} AS BIGINT)" if plan.ts_kind == "integral" else (
        f"unix_micros(CAST({col_sql} AS TIMESTAMP))")
    message = _string(f"{OPERATOR}: {side} record with null field {field!r} ({side}_ts)")
    return f"CASE WHEN {col_sql} IS NULL THEN raise_error({message}) ELSE {as_long} END"


def _time_unit(plan: _Plan) -> int:
    # Retention and stream time are given in ms; timestamps are compared in micros.
    return 1 if plan.ts_kind == "integral" else 1000


def _bucket_sql(ts: str, stats: str) -> str:
    """The key's bucket holding ts, clamped to [0, buckets - 1]. Clamping before subtracting
    keeps the arithmetic inside [0, max - min]: no overflow for any ts."""
    return (f"CASE WHEN {ts} <= {stats}.min_ts THEN 0 "
            f"WHEN {ts} > {stats}.min_ts + {stats}.width * {stats}.buckets - 1 "
            f"THEN {stats}.buckets - 1 "
            f"ELSE ({ts} - {stats}.min_ts) div {stats}.width END")


def _table_ctes(plan: _Plan, table_view: str, *, dense_ids: bool, broadcast_stats: bool) -> str:
    """CTEs `versions`, `stats` and `intervals` (the bucketed validity intervals) of the table.

    Internal columns carry the reserved prefix so that no user column can shadow them.
    """
    p = RESERVED_PREFIX
    key, ts = _ident(plan.table_key), _ident(plan.table_ts)
    values = "".join(f", {_ident(c)}" for c in plan.value_cols)
    # An integer ts is its own long form: the output valid_from is cast back from __asof_from
    # rather than carried twice through the broadcast.
    carry_valid_from = plan.valid_from_col is not None and plan.ts_kind == "timestamp"
    valid_from = f", {ts} AS {_ident(plan.valid_from_col)}" if carry_valid_from else ""
    valid_from_ref = f", v.{_ident(plan.valid_from_col)}" if carry_valid_from else ""
    value_refs = "".join(f", v.{_ident(c)}" for c in plan.value_cols)
    tomb = (f"coalesce({_ident(plan.tombstone_col)}, false)" if plan.tombstone_col else "false")
    v = plan.versions_per_bucket
    same = _string(f"{OPERATOR}: the table holds two versions with the same "
                   f"({plan.table_key}, {plan.table_ts}) = (")
    one_row = _string("); a versioned table keeps one row per (key, ts)")
    duplicate = (f"raise_error(concat({same}, CAST(v.{p}k AS STRING), ', ', CAST(v.{p}ts AS STRING), "
                 f"{one_row}))")
    base = ("coalesce(sum(buckets) OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)"
            if dense_ids else "0")
    bucket_id = "s.base + b" if dense_ids else "b"
    hint = "/*+ BROADCAST(s) */ " if broadcast_stats else ""
    bound = "CAST(NULL AS BIGINT)"
    if plan.history_retention_ms is not None:
        unit = _time_unit(plan)
        stream_time = (f"(SELECT max({p}ts) FROM {p}versions)" if plan.table_stream_time is None
                       else f"CAST({plan.table_stream_time * unit} AS BIGINT)")
        bound = f"{stream_time} - {plan.history_retention_ms * unit}"
    return f"""
{p}versions AS (
  SELECT {key} AS {p}k, {_ts_long(ts, plan, plan.table_ts, 'table')} AS {p}ts, {tomb} AS {p}tomb
         {valid_from}{values}
  FROM {table_view} WHERE {key} IS NOT NULL
),
{p}stats AS (
  SELECT k, min_ts, (max_ts - min_ts) div buckets + 1 AS width, buckets, {base} AS base
  FROM (SELECT {p}k AS k, min({p}ts) AS min_ts, max({p}ts) AS max_ts,
               (count(1) + {v - 1}) div {v} AS buckets
        FROM {p}versions GROUP BY {p}k)
),
{p}chained AS (
  -- Same-ts rows sort non-tombstone first, so a duplicate is seen by a row that is kept.
  SELECT *, lead({p}ts) OVER (PARTITION BY {p}k ORDER BY {p}ts, {p}tomb) AS {p}next FROM {p}versions
),
{p}intervals AS (
  -- A tombstone ends the previous version (through {p}next) and answers nothing itself.
  SELECT {hint}v.{p}k, {bucket_id} AS {p}bucket, v.{p}ts AS {p}from,
         CASE WHEN v.{p}next = v.{p}ts THEN {duplicate} ELSE v.{p}next END AS {p}to,
         v.{p}next IS NULL AS {p}latest, {bound} AS {p}bound{valid_from_ref}{value_refs}
  FROM {p}chained v JOIN {p}stats s ON v.{p}k = s.k
  LATERAL VIEW explode(sequence({_bucket_sql(f'v.{p}ts', 's')},
      CASE WHEN v.{p}next IS NULL THEN s.buckets - 1
      ELSE {_bucket_sql(f'v.{p}next - 1', 's')} END)) x AS b
  WHERE NOT v.{p}tomb
)"""


def _join_sql(plan: _Plan, stream_view: str, table_view: str, *, broadcast: bool) -> str:
    p = RESERVED_PREFIX
    hint_stats = "/*+ BROADCAST(s) */ " if broadcast else ""
    hint_table = "/*+ BROADCAST(t) */ " if broadcast else ""
    lookup = _ident(plan.lookup_key)
    stream_ts = _ts_long(_ident(plan.stream_ts), plan, plan.stream_ts, "stream")
    bucket = f"s.base + {_bucket_sql(f'q.{p}ts', 's')}" if broadcast else _bucket_sql(f"q.{p}ts", "s")
    key_match = "" if broadcast else f"q.{p}key = t.{p}k AND "
    retention = (f" AND (t.{p}latest OR t.{p}bound IS NULL OR q.{p}ts >= t.{p}bound)"
                 if plan.history_retention_ms is not None else "")
    out = [f"q.{_ident(c)}" for c in plan.stream_columns] + [f"t.{_ident(c)}" for c in plan.value_cols]
    if plan.valid_from_col and plan.ts_kind == "timestamp":
        out.append(f"t.{_ident(plan.valid_from_col)}")
    elif plan.valid_from_col:
        out.append(f"CAST(t.{p}from AS {plan.table_ts_type}) AS {_ident(plan.valid_from_col)}")
    join = "LEFT OUTER JOIN" if plan.how == "left" else "JOIN"
    ctes = _table_ctes(plan, table_view, dense_ids=broadcast, broadcast_stats=broadcast)
    return f"""WITH {ctes},
{p}probe AS (
  SELECT {hint_stats}q.*, {bucket} AS {p}bucket
  FROM (SELECT *, {lookup} AS {p}key, {stream_ts} AS {p}ts FROM {stream_view}) q
  LEFT OUTER JOIN {p}stats s ON q.{p}key = s.k
)
SELECT {hint_table}{', '.join(out)}
FROM {p}probe q {join} {p}intervals t
  ON {key_match}q.{p}bucket = t.{p}bucket AND t.{p}from <= q.{p}ts
     AND (t.{p}to IS NULL OR q.{p}ts < t.{p}to){retention}"""


def _run_sql(spark: SparkSession, views: dict[str, DataFrame], build: Callable[[dict[str, str]], str]
             ) -> DataFrame:
    """spark.sql over temporary views with fresh names, dropped once the query is analysed (the
    returned DataFrame holds the analysed plan, not the view names).

    Each view is over the DataFrame plus a column dropped again, not over the DataFrame itself:
    dropping a view uncaches every cached plan that Spark finds equal to the view's (a plain
    `select("*")` counts as equal), which would silently unpersist a caller's `persist()` of the
    very DataFrame passed in. The added-and-dropped column makes the view's plan differ while
    the cached plan inside it is still found and used."""
    from pyspark.sql import functions as F

    names = {alias: f"{RESERVED_PREFIX}{alias}_{uuid.uuid4().hex}" for alias in views}
    tag = f"{RESERVED_PREFIX}view"
    for alias, df in views.items():
        df.withColumn(tag, F.lit(True)).drop(tag).createOrReplaceTempView(names[alias])
    try:
        return spark.sql(build(names))
    finally:
        for name in names.values():
            spark.catalog.dropTempView(name)


def _estimated_bytes(df: DataFrame) -> int | None:
    """Spark's size estimate of a plan, or None where it is not reachable (Spark Connect)."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
    except Exception:
        return None
    # py4j hands a Scala BigInt over as a Python int; older bridges as a JavaObject.
    return size if isinstance(size, int) else int(size.toString())


# --- the broadcast index (JVM) --------------------------------------------------------------

def _index_unusable(plan: _Plan, stream: DataFrame, table: DataFrame) -> str | None:
    """Why the JVM index cannot run this join, or None when it can."""
    from joins.spark import jvm

    if not plan.integral_keys:
        stream_key = stream.schema[plan.lookup_key].dataType.simpleString()
        table_key = table.schema[plan.table_key].dataType.simpleString()
        if stream_key != table_key:
            # Other keys are hashed, and equal values of different types hash differently.
            return f"the stream key is {stream_key} and the table key {table_key}"
        if any(t in table_key for t in ("float", "double", "map<")):
            # -0.0 = 0.0 and NaN = NaN in joins but not in a hash; maps have no hash at all.
            return f"the index cannot hash keys of type {table_key}"
    stream_type = stream.schema[plan.stream_ts].dataType.typeName()
    table_type = table.schema[plan.table_ts].dataType.typeName()
    if plan.ts_kind == "timestamp" and stream_type != table_type:
        # timestamp vs timestamp_ntz compare through the session time zone; the SQL plans do that.
        return f"the stream ts is {stream_type} and the table ts {table_type}"
    return jvm.unavailable_reason(stream.sparkSession)


class _HashCollision(Exception):
    """Two table keys share a 64-bit hash (astronomically rare): use a plan without the index."""


def _index_join(plan: _Plan, stream: DataFrame, table: DataFrame) -> DataFrame:
    """The join through temporaljoins.AsOfJoin (joins/spark/jvm): the table is indexed once (one
    Spark job, now) and broadcast; each stream partition probes it in place. Same answers as the
    SQL plans, by the same rules: the index applies tombstones and the retention bound.

    Columns are passed by position and read in the JVM (integer ts as is, timestamps as their
    microseconds): no projection in front of either side. Integer keys are the index's keys; any
    other key (a string, a composite key's struct) is hashed to 64 bits on both sides, carried
    along with each version and compared on every answer, so a hash shared with a stream key
    absent from the table never answers."""
    from pyspark.sql import DataFrame as _DataFrame

    from joins.spark import jvm

    spark = stream.sparkSession
    hashed = f"{RESERVED_PREFIX}hashed_key"
    key_copy = f"{RESERVED_PREFIX}key"
    if not plan.integral_keys:
        def with_hash(df: DataFrame, col: str) -> DataFrame:
            c = _ident(col)
            return df.selectExpr("*", f"CASE WHEN {c} IS NULL THEN NULL ELSE xxhash64({c}) END AS {hashed}")

        stream, table = with_hash(stream, plan.lookup_key), with_hash(table, plan.table_key)
    stream_cols, table_cols = stream.columns, table.columns
    value_ords = [table_cols.index(c) for c in plan.value_cols]
    value_names = list(plan.value_cols)
    if plan.valid_from_col is not None:
        value_ords.append(table_cols.index(plan.table_ts))
        value_names.append(plan.valid_from_col)
    key_check_field = -1
    if not plan.integral_keys:
        key_check_field = len(value_ords)
        value_ords.append(table_cols.index(plan.table_key))
        value_names.append(key_copy)
    index_key = hashed if not plan.integral_keys else plan.table_key
    probe_key = hashed if not plan.integral_keys else plan.lookup_key
    unit = _time_unit(plan)
    retention = plan.history_retention_ms
    stream_time = plan.table_stream_time
    entry = jvm.entry(spark)
    try:
        index = entry.index(
            table._jdf, table_cols.index(index_key), table_cols.index(plan.table_ts),
            table_cols.index(plan.tombstone_col) if plan.tombstone_col else -1, value_ords, value_names,
            retention is not None, (retention or 0) * unit,
            stream_time is not None, (stream_time or 0) * unit,
            f"{OPERATOR}: table record with null field {plan.table_ts!r} (table_ts)",
            f"{OPERATOR}: the table holds two versions with the same ({plan.table_key}, {plan.table_ts}) = (",
            "); a versioned table keeps one row per (key, ts)", key_check_field)
    except Exception as exc:
        raise _java_error(exc) from None
    joined = _DataFrame(entry.probe(
        stream._jdf, stream_cols.index(probe_key), stream_cols.index(plan.stream_ts), index,
        plan.how == "left", f"{OPERATOR}: stream record with null field {plan.stream_ts!r} (stream_ts)",
        stream_cols.index(plan.lookup_key) if not plan.integral_keys else -1, key_check_field), spark)
    return joined if plan.integral_keys else joined.drop(hashed, key_copy)


def _java_error(exc: Exception) -> Exception:
    """A failure of the index build as the engine's error where it is one of ours (a duplicate
    version, a table too big to index), else unchanged."""
    from joins.errors import InputRecordError

    java = getattr(exc, "java_exception", None)
    if java is None:
        return exc
    name = java.getClass().getName()
    message = str(java.getMessage())
    if message.startswith("HASH_COLLISION"):
        return _HashCollision(message)
    if name == "java.lang.IllegalArgumentException":
        return InputRecordError(message)
    if name == "java.lang.IllegalStateException":
        return ConfigError(f"{OPERATOR}: {message}")
    return exc


# --- public API ------------------------------------------------------------------------------

def asof_join(stream: DataFrame, table: DataFrame, *, stream_key: str, stream_ts: str, table_key: str,
              table_ts: str, how: JoinHow = "inner", table_value_cols: Sequence[str] | None = None,
              history_retention_ms: int | None = None, table_stream_time: int | None = None,
              tombstone_col: str | None = None, table_key_from: str | None = None,
              valid_from_col: str | None = "table_valid_from",
              versions_per_bucket: int = DEFAULT_VERSIONS_PER_BUCKET, strategy: Strategy = "auto",
              broadcast_max_bytes: int = DEFAULT_BROADCAST_MAX_BYTES) -> DataFrame:
    """Join every stream row to the table version valid at its ts. Lazy, except that the
    "index" strategy (which "auto" prefers) indexes the table now.

    stream, table: the stream rows and the versioned table (at most one row per (key, ts)).
    stream_key / stream_ts: the stream's key and event-time columns.
    table_key / table_ts: the table's key and version-time (valid_from) columns. Both ts columns
        are integers (epoch ms) or both timestamps.
    how: "inner" drops stream rows without an answer, "left" keeps them with null table columns.
    table_value_cols: table columns to output (default: all but key, ts and tombstone_col).
    history_retention_ms: the versioned table's history retention; None = unbounded history.
    table_stream_time: the table's stream time (epoch ms) for retention; None = the table's max
        ts over all keys.
    tombstone_col: a boolean table column; a true row is a tombstone version (reads as null).
    table_key_from: a stream column holding the table key (global-table style), used instead of
        stream_key for the lookup; a null key joins nothing.
    valid_from_col: output column for the answering version's ts (None to leave it out).
    versions_per_bucket: target versions per time bucket (smaller = finer buckets, fewer
        candidates per lookup, a larger bucketed table).
    strategy: how the table reaches the stream rows (docs/asof_join.md):
        "index": the table is indexed in memory (by key, then ts) and broadcast, each stream row
            answered by a binary search in the JVM (joins/spark/jvm). Fastest; keys of one type
            on both sides and not floating point (non-integer keys are hashed and checked), a
            table that fits in memory, and a session from joins.spark.get_spark. The index is
            built when this function is called (one Spark job over the table); the join stays
            lazy.
        "broadcast": the bucketed validity intervals (pure SQL) are broadcast; the stream is
            not shuffled.
        "shuffle": the bucketed intervals and the stream meet through a shuffle on (key,
            bucket); for tables too big to broadcast.
        "auto": "index" where it can run and Spark estimates the table at most
            broadcast_max_bytes, else "broadcast" within that size, else "shuffle" (also where
            the size is unknown).

    Output: every stream column, then the value columns, then valid_from_col.
    """
    plan = _validate(stream.schema, table.schema, stream_key=stream_key, stream_ts=stream_ts,
                     table_key=table_key, table_ts=table_ts, how=how, table_value_cols=table_value_cols,
                     history_retention_ms=history_retention_ms, table_stream_time=table_stream_time,
                     tombstone_col=tombstone_col, table_key_from=table_key_from,
                     valid_from_col=valid_from_col, versions_per_bucket=versions_per_bucket,
                     strategy=strategy)
    index_failed = False
    if strategy == "index":
        reason = _index_unusable(plan, stream, table)
        if reason is not None:
            raise _config_error("strategy", f"'index' cannot run here: {reason}; use 'auto', "
                                            "'broadcast' or 'shuffle'")
        try:
            return _index_join(plan, stream, table)
        except _HashCollision:
            index_failed, strategy = True, "auto"
    if strategy == "auto":
        size = _estimated_bytes(table)
        small = size is not None and size <= broadcast_max_bytes
        if small and not index_failed and _index_unusable(plan, stream, table) is None:
            try:
                return _index_join(plan, stream, table)
            except _HashCollision:
                pass
        broadcast = small
    else:
        broadcast = strategy == "broadcast"
    return _run_sql(stream.sparkSession, {"stream": stream, "table": table},
                    lambda v: _join_sql(plan, v["stream"], v["table"], broadcast=broadcast))


def versions_by_bucket(table: DataFrame, *, table_key: str, table_ts: str, tombstone_col: str | None = None,
                       versions_per_bucket: int = DEFAULT_VERSIONS_PER_BUCKET) -> DataFrame:
    """The bucketed validity intervals the join probes, for inspection and tuning.

    Columns: key, bucket, valid_from, valid_to (null = still valid), latest.
    """
    plan = _validate(table.schema, table.schema, stream_key=table_key, stream_ts=table_ts,
                     table_key=table_key, table_ts=table_ts, how="inner", table_value_cols=[],
                     history_retention_ms=None, table_stream_time=None, tombstone_col=tombstone_col,
                     table_key_from=None, valid_from_col=None, versions_per_bucket=versions_per_bucket,
                     strategy="shuffle")
    p = RESERVED_PREFIX

    def build(views: dict[str, str]) -> str:
        ctes = _table_ctes(plan, views["table"], dense_ids=False, broadcast_stats=False)
        return (f"WITH {ctes}\nSELECT {p}k AS key, {p}bucket AS bucket, {p}from AS valid_from, "
                f"{p}to AS valid_to, {p}latest AS latest FROM {p}intervals")

    return _run_sql(table.sparkSession, {"table": table}, build)


def bucket_stats(table: DataFrame, *, table_key: str, table_ts: str,
                 versions_per_bucket: int = DEFAULT_VERSIONS_PER_BUCKET) -> DataFrame:
    """Per key: k, min_ts, width, buckets (the bucket count grows with the key's version count)."""
    plan = _validate(table.schema, table.schema, stream_key=table_key, stream_ts=table_ts,
                     table_key=table_key, table_ts=table_ts, how="inner", table_value_cols=[],
                     history_retention_ms=None, table_stream_time=None, tombstone_col=None,
                     table_key_from=None, valid_from_col=None, versions_per_bucket=versions_per_bucket,
                     strategy="shuffle")
    def build(views: dict[str, str]) -> str:
        ctes = _table_ctes(plan, views["table"], dense_ids=False, broadcast_stats=False)
        return f"WITH {ctes}\nSELECT k AS key, min_ts, width, buckets FROM {RESERVED_PREFIX}stats"

    return _run_sql(table.sparkSession, {"table": table}, build)
