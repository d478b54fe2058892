"""`asof_join`, the public entry: validates the join, picks a strategy and runs it; and the
inspection of the SQL plans' buckets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins.asof.errors import HashCollision
from joins.asof.held import HeldJoin, HeldTable, held_index_join
from joins.asof.index import index_join, index_unusable, shuffled_index_join
from joins.asof.plan import (
    DEFAULT_BROADCAST_MAX_BYTES,
    DEFAULT_VERSIONS_PER_BUCKET,
    RESERVED_PREFIX,
    JoinHow,
    Strategy,
    config_error,
    table_only_plan,
    validate,
)
from joins.asof.sql import join_sql, run_sql, table_ctes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _estimated_bytes(df: DataFrame) -> int | None:
    """Spark's size estimate of a plan, or None where it is not reachable (Spark Connect)."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
    except Exception:
        return None
    # py4j hands a Scala BigInt over as a Python int; older bridges as a JavaObject.
    return size if isinstance(size, int) else int(size.toString())


# A task of the shuffled index holds its partition of the table's versions in memory: aim for
# about this much of the table (Spark's estimate) per partition.
SHUFFLED_INDEX_BYTES_PER_PARTITION = 128 * 1024 * 1024
# Spark estimates a plan it cannot size (an RDD, a Python UDF's output) at about Long.MAX_VALUE.
UNKNOWN_BYTES = 2**62


def _shuffle_partitions(stream: DataFrame, table_bytes: int | None) -> int:
    """The shuffled index's partitions: the session's shuffle partitions, more for a large table."""
    configured = int(stream.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)
    if table_bytes is None or table_bytes >= UNKNOWN_BYTES:
        return configured
    return max(configured, -(-table_bytes // SHUFFLED_INDEX_BYTES_PER_PARTITION))


def asof_join(stream: DataFrame, table: DataFrame, *, stream_key: str, stream_ts: str, table_key: str,
              table_ts: str, how: JoinHow = "inner", table_value_cols: Sequence[str] | None = None,
              history_retention_ms: int | None = None, table_stream_time: int | None = None,
              tombstone_col: str | None = None, table_key_from: str | None = None,
              valid_from_col: str | None = "table_valid_from",
              versions_per_bucket: int = DEFAULT_VERSIONS_PER_BUCKET, strategy: Strategy = "auto",
              broadcast_max_bytes: int = DEFAULT_BROADCAST_MAX_BYTES) -> DataFrame:
    """Join every stream row to the table version valid at its ts: seed 000's versioned-store
    get(key, stream ts) (KIP-914), for every stream row at once. Lazy, except that the "index"
    strategy (which "auto" prefers) indexes the table now.

    For each stream row, the table version of the same key with the largest ts <= the stream ts
    answers (an equal ts counts); a tombstone version reads as null; with history retention, a
    stream ts older than table stream time - history retention is answered only by the key's
    latest version (it never expires), else null.

    stream, table: the stream rows and the versioned table (at most one row per (key, ts), which
        the versioned ingest guarantees: a duplicate fails the join rather than doubling output
        rows).
    stream_key / stream_ts: the stream's key and event-time columns.
    table_key / table_ts: the table's key and version-time (valid_from) columns. Both ts columns
        are integers (epoch ms) or both timestamps. Any long is a valid ts, its minimum ("since
        forever") and maximum included.
    how: "inner" drops stream rows without an answer, "left" keeps them with null table columns.
    table_value_cols: table columns to output (default: all but key, ts and tombstone_col).
    history_retention_ms: the versioned table's history retention; None = unbounded history.
    table_stream_time: the table's stream time (epoch ms) for retention; None = the table's max
        ts over all keys.
    tombstone_col: a boolean table column; a true row is a tombstone version (reads as null).
    table_key_from: a stream column holding the table key (global-table style), used instead of
        stream_key for the lookup; a null key joins nothing.
    valid_from_col: output column for the answering version's ts (None to leave it out).
    versions_per_bucket: target versions per time bucket of the SQL plans (smaller = finer
        buckets, fewer candidates per lookup, a larger bucketed table).
    strategy: how the table reaches the stream rows (docs/asof_join.md):
        "index": the table is indexed in memory (by key, then ts) and broadcast, each stream row
            answered by a binary search in the JVM (joins/spark/jvm). Fastest; keys of one type
            on both sides and not floating point (non-integer keys are hashed and checked), a
            table that fits in memory, and a session from joins.spark.get_spark. The index is
            built when this function is called (one Spark job over the table); the join stays
            lazy.
        "index_shuffle": the index's shuffle form, for tables too big to broadcast: both sides
            are hash-partitioned on the key (the session's shuffle partitions, more for a large
            table) and each task indexes its partition of the table and probes its partition
            of the stream. Where "index" can run. Not lazy: Spark's adaptive execution runs
            both sides' shuffles when the join is built (to make the RDD the tasks read), and
            history retention without table_stream_time takes one job for the table's largest ts.
        "broadcast": the bucketed validity intervals (pure SQL) are broadcast; the stream is
            not shuffled.
        "shuffle": the bucketed intervals and the stream meet through a shuffle on (key,
            bucket); for tables too big to broadcast, where the index cannot run.
        "auto": where the index can run, "index" if Spark estimates the table at most
            broadcast_max_bytes, else "index_shuffle" (also where the size is unknown); where it
            cannot, "broadcast" within that size, else "shuffle".

    Bad records: a duplicate (key, ts) in the table or a null ts on either side fails naming the
    record. Where the broadcast index finds it (a table record), this function raises
    InputRecordError; everything else fails in the action that runs the result: run it under
    `joins.asof.input_errors()` to get InputRecordError there too. Keys that are not integers are
    hashed to 64 bits for the index; two table keys sharing a hash (about one table in 10^7 at a
    million keys) make "auto" use a SQL plan, and fail an "index_shuffle" join's action with
    HASH_COLLISION: use "shuffle" for that table.

    Output: every stream column, then the value columns, then valid_from_col.
    """
    plan = validate(stream.schema, table.schema, stream_key=stream_key, stream_ts=stream_ts,
                    table_key=table_key, table_ts=table_ts, how=how, table_value_cols=table_value_cols,
                    history_retention_ms=history_retention_ms, table_stream_time=table_stream_time,
                    tombstone_col=tombstone_col, table_key_from=table_key_from,
                    valid_from_col=valid_from_col, versions_per_bucket=versions_per_bucket,
                    strategy=strategy)
    index_failed = False
    if strategy in ("index", "index_shuffle"):
        reason = index_unusable(plan, stream, table.schema)
        if reason is not None:
            raise config_error("strategy", f"{strategy!r} cannot run here: {reason}; use 'auto', "
                                           "'broadcast' or 'shuffle'")
        if strategy == "index_shuffle":
            return shuffled_index_join(plan, stream, table,
                                       _shuffle_partitions(stream, _estimated_bytes(table)))
        try:
            return index_join(plan, stream, table)
        except HashCollision:
            index_failed, strategy = True, "auto"
    if strategy == "auto":
        size = _estimated_bytes(table)
        small = size is not None and size <= broadcast_max_bytes
        if not index_failed and index_unusable(plan, stream, table.schema) is None:
            if not small:
                return shuffled_index_join(plan, stream, table, _shuffle_partitions(stream, size))
            try:
                return index_join(plan, stream, table)
            except HashCollision:
                pass
        broadcast = small
    else:
        broadcast = strategy == "broadcast"
    return run_sql(stream.sparkSession, {"stream": stream, "table": table},
                   lambda v: join_sql(plan, v["stream"], v["table"], broadcast=broadcast))


def held_asof_join(stream: DataFrame, held: HeldTable, *, stream_key: str, stream_ts: str,
                   table_key: str, table_ts: str, how: JoinHow = "inner",
                   table_value_cols: Sequence[str] | None = None,
                   history_retention_ms: int | None = None, table_stream_time: int | None = None,
                   tombstone_col: str | None = None,
                   valid_from_col: str | None = "table_valid_from",
                   min_stream_ts: int | None = None) -> HeldJoin | None:
    """`asof_join` through a version index held from one call to the next (`joins.asof.held`):
    the table is `held`'s (its history read only when nothing usable is held). None where the
    index cannot run or the table is too large to hold: the caller joins another way. The same
    answers as asof_join for the rows joined; a table held as a window leaves the rows older
    than its start to the caller (`HeldJoin.rest`). `min_stream_ts`: the stream's smallest ts,
    when known (see held_index_join)."""
    plan = validate(stream.schema, held.schema, stream_key=stream_key, stream_ts=stream_ts,
                    table_key=table_key, table_ts=table_ts, how=how, table_value_cols=table_value_cols,
                    history_retention_ms=history_retention_ms, table_stream_time=table_stream_time,
                    tombstone_col=tombstone_col, table_key_from=None, valid_from_col=valid_from_col,
                    versions_per_bucket=DEFAULT_VERSIONS_PER_BUCKET, strategy="index")
    return held_index_join(plan, stream, held, min_stream_ts)


def versions_by_bucket(table: DataFrame, *, table_key: str, table_ts: str, tombstone_col: str | None = None,
                       versions_per_bucket: int = DEFAULT_VERSIONS_PER_BUCKET) -> DataFrame:
    """The bucketed validity intervals the SQL plans probe, for inspection and tuning.

    Columns: key, bucket, valid_from, valid_to (null = still valid), latest.
    """
    plan = table_only_plan(table.schema, table_key=table_key, table_ts=table_ts,
                           tombstone_col=tombstone_col, versions_per_bucket=versions_per_bucket)
    p = RESERVED_PREFIX

    def build(views: dict[str, str]) -> str:
        ctes = table_ctes(plan, views["table"], dense_ids=False, broadcast_stats=False)
        return (f"WITH {ctes}\nSELECT {p}k AS key, {p}bucket AS bucket, {p}from AS valid_from, "
                f"{p}to AS valid_to, {p}latest AS latest FROM {p}intervals")

    return run_sql(table.sparkSession, {"table": table}, build)


def bucket_stats(table: DataFrame, *, table_key: str, table_ts: str,
                 versions_per_bucket: int = DEFAULT_VERSIONS_PER_BUCKET) -> DataFrame:
    """Per key: key, min_ts, width, buckets (the bucket count grows with the key's version
    count), max_ts, shift (1 where the key's versions span more than a long: offsets are then
    taken on ts halved)."""
    plan = table_only_plan(table.schema, table_key=table_key, table_ts=table_ts, tombstone_col=None,
                           versions_per_bucket=versions_per_bucket)

    def build(views: dict[str, str]) -> str:
        ctes = table_ctes(plan, views["table"], dense_ids=False, broadcast_stats=False)
        return (f"WITH {ctes}\nSELECT k AS key, min_ts, width, buckets, max_ts, shift "
                f"FROM {RESERVED_PREFIX}stats")

    return run_sql(table.sparkSession, {"table": table}, build)
