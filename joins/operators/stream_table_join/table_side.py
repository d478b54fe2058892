"""The table side of the incremental stream-table join: lookups that touch only what a batch needs.

A micro-batch looks up a few thousand keys; the table may hold years of history, and is read
again only where it must be. A versioned table is held in the driver from batch to batch
(`held_lookup`, `joins.asof.held`): whole up to `held_max_rows` versions, as a window of its
recent history beyond; a batch merges in the versions its table gained and probes that index.
What it cannot answer (lookups older than the window) is narrowed, starting from those
lookups, never from the table: the history is narrowed to about one row per looked-up
key first (`history.py`: the keys broadcast into the scan, the versions below the smallest
lookup ts collapsed to the one valid there), then the as-of join (`joins.asof`, its version
index or skew-proof bucketed validity intervals) runs on that.

Versioned tables (seed 000) are the versions log of `joins.operators.versioned_table`: one row
per stored put, the last sequence (`batch_id`, `arrival`) of a (key, ts) wins. Unversioned
tables are looked up by latest arrival (offset semantics); their keyed state is an append-only
log (one row per key per batch) read as "largest arrival per key".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from joins import lake
from joins.asof import HELD_MAX_ROWS
from joins.errors import ConfigError
from joins.operators.stream_table_join.columns import (
    TABLE_KEY,
    VALID_FROM,
    JoinColumns,
    require,
)
from joins.operators.stream_table_join.history import (
    SEQ_ARRIVAL,
    SEQ_BATCH,
    held_table,
    narrow_versions,
    table_value_name,
)
from joins.operators.stream_table_join.state import UNVERSIONED_TABLE, JoinPaths
from joins.spark.frames import checkpointed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.asof import HeldJoin, HeldTable
    from joins.incremental import StepContext
    from joins.lake import ChangeStats
    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

# Above this many rows the narrowed table is joined through a shuffle instead of broadcast.
BROADCAST_MAX_ROWS = 2_000_000
_WIN = "_win"


def _null_lookup(lookups: DataFrame, value_types: dict[str, str]) -> DataFrame:
    from pyspark.sql import functions as F

    return lookups.select(
        "*", *(F.lit(None).cast(t).alias(table_value_name(c)) for c, t in value_types.items()),
        F.lit(None).cast("long").alias(VALID_FROM))


def versioned_lookup(lookups: DataFrame, versions: DataFrame | None, *, cols: JoinColumns,
                     value_cols: tuple[str, ...], value_types: dict[str, str],
                     history_retention_ms: int | None, table_stream_time: int | None,
                     strategy: Literal["auto", "broadcast", "shuffle"] = "auto") -> DataFrame:
    """Every lookup row (columns incl. TABLE_KEY and `cols.ts`) with the table's values as of
    its ts under get(key, ts)'s rules (left join: nulls where get answers null), the values
    renamed `table_<col>`, plus VALID_FROM (the answering version's ts; null = no answer).

    `lookups` should be materialized (a checkpoint): the as-of join reads it more than once."""
    from joins.asof import asof_join
    from joins.spark import jvm

    if versions is None:
        return _null_lookup(lookups, value_types)
    key, ts, tomb = cols.table_key, cols.table_ts, cols.tombstone
    table = narrow_versions(versions, lookups, cols=cols, value_cols=value_cols)
    if strategy == "auto" and jvm.unavailable_reason(lookups.sparkSession) is None:
        # The narrowed table is about one row per looked-up key: the version index reads it
        # once, in the one job that builds it (no checkpoint, no count: each a Spark job of a
        # micro-batch's latency). Spark cannot size the filtered plan, so "auto" is not asked.
        try:
            return asof_join(lookups, table, stream_key=TABLE_KEY, stream_ts=cols.ts,
                             table_key=key, table_ts=ts, how="left",
                             table_value_cols=[table_value_name(c) for c in value_cols],
                             history_retention_ms=history_retention_ms,
                             table_stream_time=table_stream_time, tombstone_col=tomb,
                             valid_from_col=VALID_FROM, strategy="index")
        except ConfigError:
            pass  # keys the index cannot take (floating point): the SQL plans below
    # Materialized once, outside any cache: the SQL plans read the table several times (a
    # re-read would scan the history again), and a checkpoint, unlike a cached frame, cannot
    # be dropped from under it by the temporary views the join plans with.
    table = checkpointed(table)
    if strategy == "auto":
        # The narrowed table is about one row per looked-up key: shipped to every task, the
        # lookups are never shuffled. Spark's size estimate of a checkpoint cannot tell.
        strategy = "broadcast" if table.count() <= BROADCAST_MAX_ROWS else "shuffle"
    return asof_join(lookups, table, stream_key=TABLE_KEY, stream_ts=cols.ts, table_key=key,
                     table_ts=ts, how="left",
                     table_value_cols=[table_value_name(c) for c in value_cols],
                     history_retention_ms=history_retention_ms, table_stream_time=table_stream_time,
                     tombstone_col=tomb, valid_from_col=VALID_FROM, strategy=strategy)


def held_lookup(lookups: DataFrame, held: HeldTable, *, cols: JoinColumns,
                value_cols: tuple[str, ...], history_retention_ms: int | None,
                table_stream_time: int | None, min_lookup_ts: int | None = None) -> HeldJoin | None:
    """versioned_lookup's answers through the table's history held from batch to batch
    (`joins.asof.held`): None where it is not held and too large to hold even as a window (or
    the index cannot run here), and the caller narrows the history to the batch's keys
    instead; a window leaves the lookups older than its start (`HeldJoin.rest`)."""
    from joins.asof import held_asof_join

    return held_asof_join(lookups, held, stream_key=TABLE_KEY, stream_ts=cols.ts,
                          table_key=cols.table_key, table_ts=cols.table_ts, how="left",
                          table_value_cols=[table_value_name(c) for c in value_cols],
                          history_retention_ms=history_retention_ms,
                          table_stream_time=table_stream_time, tombstone_col=cols.tombstone,
                          valid_from_col=VALID_FROM, min_stream_ts=min_lookup_ts)


def latest_per_key(rows: DataFrame, *, cols: JoinColumns, value_cols: tuple[str, ...]) -> DataFrame:
    """One row per key: the last arrival (unversioned table semantics), tombstones included."""
    from pyspark.sql import functions as F

    body = F.struct(F.col(cols.table_ts), F.col(cols.tombstone), F.col(cols.table_arrival),
                    *(F.col(c) for c in value_cols))
    return (rows.where(F.col(cols.table_key).isNotNull()).groupBy(cols.table_key)
            .agg(F.max_by(body, F.col(cols.table_arrival)).alias(_WIN))
            .select(cols.table_key, *(F.col(f"{_WIN}.{c}").alias(c) for c in
                                      (cols.table_ts, cols.tombstone, cols.table_arrival, *value_cols))))


def unversioned_lookup(lookups: DataFrame, state: DataFrame | None, *, cols: JoinColumns,
                       value_cols: tuple[str, ...], value_types: dict[str, str]) -> DataFrame:
    """get(key) by latest arrival for every lookup row; `state` is the keyed state log (plus the
    batch's own changes), any number of rows per key. Same output shape as versioned_lookup."""
    from pyspark.sql import functions as F

    if state is None:
        return _null_lookup(lookups, value_types)
    keys = lookups.where(F.col(TABLE_KEY).isNotNull()).select(TABLE_KEY).distinct()
    candidates = state.join(F.broadcast(keys), state[cols.table_key] == keys[TABLE_KEY]).drop(TABLE_KEY)
    current = (latest_per_key(candidates, cols=cols, value_cols=value_cols)
               .where(~F.col(cols.tombstone))
               .select(F.col(cols.table_key).alias("_state_key"),
                       *(F.col(c).alias(table_value_name(c)) for c in value_cols),
                       F.col(cols.table_ts).alias(VALID_FROM)))
    joined = lookups.join(current, lookups[TABLE_KEY] == current["_state_key"], "left")
    return joined.drop("_state_key")


# ---- the table side of one micro-batch ----------------------------------------------------------


@dataclass(frozen=True)
class TableSide:
    rows_in: int | None               # table rows the batch consumed
    stream_time: int | None           # the versioned table's stream time after them
    # The stream time lookups judge history retention by: the one at the batch's start
    # (joins.microbatch); None: no lookup of the batch is beyond retention.
    retention_clock: int | None
    value_cols: tuple[str, ...]
    lookups: DataFrame | None         # to_join + table_<value> + VALID_FROM; None: no lookup
    state_rows: DataFrame | None      # keyed-state rows to append (unversioned tables)


def lookup_table(ctx: StepContext, spec: StreamTableJoinSpec, cols: JoinColumns,
                 to_join: DataFrame | None, strategy: Literal["auto", "broadcast", "shuffle"],
                 held_max_rows: int = HELD_MAX_ROWS, min_lookup_ts: int | None = None) -> TableSide:
    """Look `to_join` up in the table as the batch leaves it: the versioned table at the
    plan's pinned version (its history held from batch to batch when it has at most
    `held_max_rows` versions, a window of it when larger; 0 = never held), or the keyed state
    plus the batch's own changelog rows. `min_lookup_ts`: the smallest ts of `to_join`, when
    the decision counted it. `to_join` None (nothing joins): no lookup plan, nothing held."""
    schema = ctx.schema("table")
    value_cols = cols.resolve_table_values(schema)
    value_types = {c: schema[c].dataType.simpleString() for c in value_cols}
    where = f"table_source {ctx.source_path('table')!r}"
    stats = ctx.change_stats("table")
    if spec.table.versioned:
        require(schema, [cols.table_key, cols.table_ts, cols.tombstone, SEQ_BATCH, SEQ_ARRIVAL],
                what=f"versioned {where}")
        rows_in, stream_time = _versioned_summary(ctx, cols, stats)
        configured = table_retention(spec, ctx.source_path("table"))
        # The batch's table records are applied before its stream records, but in event-time
        # order the table would not have run ahead of them: retention is judged by the table's
        # stream time at the batch's start, so a batch covering days loses no lookup to it
        # (the reference's `begin_batch`). A first batch has no clock: nothing is beyond.
        clock = ctx.carry.get("table_stream_time")
        retention = None if clock is None else configured
        if to_join is None:
            return TableSide(rows_in, stream_time, clock, value_cols, None, None)
        from joins.spark import jvm

        def narrowed(rows: DataFrame) -> DataFrame:
            return versioned_lookup(rows, ctx.snapshot("table"), cols=cols, value_cols=value_cols,
                                    value_types=value_types, history_retention_ms=retention,
                                    table_stream_time=clock, strategy=strategy)

        # Without the JVM index nothing is held: no table identity is read for it either.
        if strategy == "auto" and held_max_rows > 0 and jvm.unavailable_reason(ctx.spark) is None:
            held = held_table(ctx, cols, value_cols, schema, held_max_rows)
            found = held_lookup(to_join, held, cols=cols, value_cols=value_cols,
                                history_retention_ms=retention, table_stream_time=clock,
                                min_lookup_ts=min_lookup_ts)
            if found is not None:
                lookups = found.joined
                if found.rest is not None:
                    # Lookups older than the held window: the history narrowed to their keys.
                    lookups = lookups.unionByName(narrowed(found.rest))
                return TableSide(rows_in, stream_time, clock, value_cols, lookups, None)
        return TableSide(rows_in, stream_time, clock, value_cols, narrowed(to_join), None)
    require(schema, [cols.table_key, cols.table_ts, cols.tombstone, cols.table_arrival],
            what=f"unversioned {where}")
    keep = [cols.table_key, cols.table_ts, cols.tombstone, cols.table_arrival, *value_cols]
    combined = ctx.state(UNVERSIONED_TABLE, columns=keep)
    batch_latest = None
    rows_in = 0
    if not ctx.range("table").empty:
        changes = ctx.changes("table").select(*keep)
        rows_in = stats.rows if stats is not None and stats.rows is not None else changes.count()
        # The batch's own changes, last arrival per key: applied before its stream records.
        batch_latest = latest_per_key(changes, cols=cols, value_cols=value_cols)
        combined = batch_latest if combined is None else combined.unionByName(batch_latest)
    lookups = None if to_join is None else unversioned_lookup(
        to_join, combined, cols=cols, value_cols=value_cols, value_types=value_types)
    return TableSide(rows_in, None, None, value_cols, lookups, batch_latest)


def table_retention(spec: StreamTableJoinSpec, path: str) -> int:
    """The versioned table's history retention: the one stored with the table (which decided
    what its ingest expired), which the spec must not contradict."""
    from joins.versioned.retention import read_history_retention

    configured = spec.table.history_retention_ms
    assert configured is not None  # the spec requires it for a versioned table
    stored = read_history_retention(path) if lake.table_exists(path) else None
    if stored is not None and stored != configured:
        raise ConfigError(f"stream_table_join: the table {path!r} was built with a history "
                          f"retention of {stored} ms, but the join is configured with "
                          f"table.history_retention_ms = {configured}: lookups would answer "
                          f"for history the table did not keep (or kept); configure {stored}")
    return configured


def _versioned_summary(ctx: StepContext, cols: JoinColumns,
                       stats: ChangeStats | None) -> tuple[int | None, int | None]:
    """(rows the versioned table gained, its stream time after them). Stream time only grows,
    so the max over the new versions and the previous stream time is exact. From the Delta
    statistics of the new files when they hold it; else one aggregate."""
    from pyspark.sql import functions as F

    before = ctx.carry.get("table_stream_time")
    if ctx.range("table").empty:
        return 0, before
    if stats is not None and stats.rows is not None and (stats.rows == 0 or cols.table_ts in stats.max):
        new_max = stats.max.get(cols.table_ts)
        rows: int | None = stats.rows
    else:
        try:
            changes = ctx.changes("table")
            row = changes.agg(F.count(F.lit(1)).alias("n"), F.max(cols.table_ts).alias("m")).first()
        except lake.LakeError:
            # A compaction rewrote the table inside the range, so its added rows are no
            # changelog: read stream time from the pinned snapshot (one column) instead.
            snap = ctx.snapshot("table", columns=[cols.table_ts])
            row = snap.agg(F.lit(None).cast("long").alias("n"), F.max(cols.table_ts).alias("m")).first()
        assert row is not None
        new_max, rows = row["m"], None if row["n"] is None else int(row["n"])
    new_max = None if new_max is None else int(new_max)
    after = new_max if before is None else (before if new_max is None else max(before, new_max))
    return rows, after


def compact_unversioned_state(spark: SparkSession, paths: JoinPaths, cols: JoinColumns) -> int | None:
    """Rewrite the keyed state of an unversioned table as one row per live key (the append log
    grows by a row per key per batch). Content-preserving, one version-guarded overwrite run
    between batches: the next plan simply reads the compacted version."""
    from pyspark.sql import functions as F

    version = lake.delta_version(paths.unversioned_table)
    if version is None:
        return None
    state = lake.read_delta(spark, paths.unversioned_table, version=version)
    value_cols = cols.resolve_table_values(state)
    keep = [cols.table_key, cols.table_ts, cols.tombstone, cols.table_arrival, *value_cols]
    # A deleted key reads as absent either way, so its tombstone need not be kept.
    live = latest_per_key(state.select(*keep), cols=cols, value_cols=value_cols).where(
        ~F.col(cols.tombstone))
    try:
        info = lake.write_delta(live, paths.unversioned_table, mode="overwrite",
                                expected_version=version,
                                commit_message=f"stream_table_join: compact keyed state of version {version}")
    except lake.ConcurrentCommitError:
        return None  # a batch committed meanwhile: the next compaction takes it
    return info.version
