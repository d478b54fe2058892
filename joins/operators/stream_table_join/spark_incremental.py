"""The stream-table join on Spark and Delta Lake, one micro-batch at a time (issue 4, item 2).

One call of `run_microbatch` = the stream rows and table versions added since the last completed
batch in, join results out, with the grace buffer and its stream time kept in Delta tables
(`state.JoinPaths`). The micro-batch rule of the reference engine holds: the batch's table-side
rows are applied before its stream rows, so every lookup of the batch sees the same table state
(the table Delta version pinned by the batch's plan). The stream side is decided set-wise by
`grace.decide` (same answers as the record-at-a-time reference processor) and looked up by
`table_side` (only the batch's keys, never a scan-and-shuffle of history).

Exactly once (see docs/stream_table_incremental.md): the batch's plan is written to the batch
log before anything is computed; a re-run of a planned batch reads exactly the inputs the plan
pins (by Delta version), so it decides exactly the same rows; every write carries an
application transaction (app id per table, version = batch id), so a write that already landed
is skipped; the `done` record is the last commit. A crash between any two commits is followed by
a re-run that produces no duplicate and no gap.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from joins import lake
from joins.errors import ConfigError
from joins.operators.stream_table_join.columns import (
    BATCH_ID,
    EMIT_SEQ,
    LATE,
    OPERATOR,
    TABLE_KEY,
    VALID_FROM,
    JoinColumns,
    require,
)
from joins.operators.stream_table_join.grace import (
    CLASS,
    DEFAULT_BLOCK_ROWS,
    JOINED,
    LATE_CLASS,
    P_BEFORE,
    PUT,
    SKIPPED_NULL_KEY,
    SKIPPED_NULL_VALUE,
    decide,
)
from joins.operators.stream_table_join.phases import phase
from joins.operators.stream_table_join.state import (
    APP_BUFFER,
    APP_OUTPUT,
    APP_QUARANTINE,
    APP_STATE,
    COMPACT_EVERY,
    BatchDone,
    BatchPlan,
    BatchStateError,
    CheckpointLog,
    JoinPaths,
    VersionRange,
    check_progress,
)
from joins.operators.stream_table_join.table_side import (
    SEQ_ARRIVAL,
    SEQ_BATCH,
    latest_per_key,
    table_value_name,
    unversioned_lookup,
    versioned_lookup,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

# Upper bounds (ms) of the lateness histogram buckets; the last bucket is open.
LATENESS_BUCKETS_MS: tuple[int, ...] = (0, 1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)

__all__ = [
    "JoinColumns",
    "JoinPaths",
    "LatenessStats",
    "MicroBatchReport",
    "run_microbatch",
    "spark_replay",
]


@dataclass(frozen=True)
class LatenessStats:
    """How far behind the buffer's stream time the batch's records arrived: stream time seen on
    arrival minus ts, 0 for a record that advanced stream time. `histogram` pairs a bucket label
    with a count (labels: `<=0ms`, `<=1000ms`, ..., `>86400000ms`)."""

    records: int = 0
    max_ms: int | None = None
    p50_ms: int | None = None
    p95_ms: int | None = None
    p99_ms: int | None = None
    histogram: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class MicroBatchReport:
    """What one micro-batch did (or, with `skipped`, that it had nothing to do)."""

    batch_id: int | None
    skipped: bool = False
    skip_reason: str | None = None
    stream_versions: tuple[int, int] | None = None   # source Delta versions consumed
    table_versions: tuple[int, int] | None = None
    table_version: int | None = None                 # the pinned table version of the lookups
    commits: dict[str, int | None] = field(default_factory=dict)  # table -> Delta version written
    rows_in_stream: int = 0
    rows_in_table: int | None = 0
    rows_out: int = 0
    evicted: int = 0
    late_joined: int = 0
    late_dropped: int = 0
    quarantined: int = 0
    skipped_null_value: int = 0
    skipped_null_key: int = 0
    inner_unmatched: int = 0
    lookup_beyond_history_retention: int = 0
    still_buffered: int = 0
    stream_time: int | None = None
    table_stream_time: int | None = None
    event_days_touched: tuple[str, ...] = ()
    lateness: LatenessStats = field(default_factory=LatenessStats)

    @property
    def rows_in(self) -> tuple[int, int | None]:
        return self.rows_in_stream, self.rows_in_table

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, skipped: bool = False,
                  skip_reason: str | None = None) -> MicroBatchReport:
        data = dict(raw)
        lat = data.pop("lateness", None) or {}
        lateness = LatenessStats(**{**lat, "histogram": tuple(tuple(h) for h in lat.get("histogram", ()))})
        for name in ("stream_versions", "table_versions"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        data["event_days_touched"] = tuple(data.get("event_days_touched", ()))
        data.update(skipped=skipped, skip_reason=skip_reason)
        return cls(**data, lateness=lateness)


# ---- planning -------------------------------------------------------------------------------


def _require_table(path: str, what: str) -> int:
    version = lake.delta_version(path)
    if version is None:
        raise ConfigError(f"{OPERATOR}: {what} {path!r} is not a Delta table (create it first; an "
                          f"empty table is fine)")
    return version


def _plan(spark: SparkSession, spec: StreamTableJoinSpec, paths: JoinPaths, log: CheckpointLog, *,
          stream_source: str, table_source: str,
          batch_id: int | None) -> BatchPlan | MicroBatchReport:
    """The plan to run (pending or new, written to the log), or the report of a batch that
    needs no run."""
    with phase(spark, "plan"):
        tail = log.state()
    done, pending = tail.last_done, tail.pending
    if batch_id is not None and batch_id < 0:
        raise ConfigError(f"{OPERATOR}: batch_id must be >= 0, got {batch_id}")
    if batch_id is not None and done is not None and batch_id <= done.batch_id:
        record = done if batch_id == done.batch_id else log.done_record(batch_id)
        if record is None:
            raise BatchStateError(f"{OPERATOR}: batch {batch_id} was never run under "
                                  f"{paths.root} (the last completed batch is {done.batch_id})")
        return MicroBatchReport.from_dict(record.report, skipped=True,
                                          skip_reason=f"batch {batch_id} is already committed")
    if pending is not None:
        if batch_id is not None and batch_id != pending.batch_id:
            raise BatchStateError(
                f"{OPERATOR}: batch {pending.batch_id} under {paths.root} is planned but not "
                f"completed; re-run it (batch_id={pending.batch_id} or None) before batch {batch_id}")
        # A crashed batch: re-run it from exactly the same inputs (the plan's versions; the
        # source paths of this call, so that a lake moved since still works).
        return dataclasses.replace(pending, stream_source=stream_source, table_source=table_source)
    stream_last = _require_table(stream_source, "stream_source")
    table_last = _require_table(table_source, "table_source")
    if done is not None:
        check_progress(done, stream_last=stream_last, table_last=table_last, root=paths.root)
    stream = VersionRange(0 if done is None else done.stream_last + 1, stream_last)
    table = VersionRange(0 if done is None else done.table_last + 1, table_last)
    if done is not None and stream.empty and table.empty:
        return MicroBatchReport(
            batch_id=None, skipped=True,
            skip_reason=f"no new stream rows or table versions since batch {done.batch_id} "
                        f"(stream version {stream_last}, table version {table_last})",
            stream_time=done.stream_time_after, table_stream_time=done.table_stream_time_after)
    plan = BatchPlan(
        batch_id=batch_id if batch_id is not None else (0 if done is None else done.batch_id + 1),
        stream_source=stream_source, table_source=table_source, stream=stream, table=table,
        buffer_version=lake.delta_version(paths.buffer),
        state_version=lake.delta_version(paths.unversioned_table),
        stream_time_before=None if done is None else done.stream_time_after,
        table_stream_time_before=None if done is None else done.table_stream_time_after,
        buffered_before=0 if done is None else int(done.report.get("still_buffered", 0)))
    with phase(spark, "plan"):
        log.write_plan(plan)
    return plan


# ---- reading --------------------------------------------------------------------------------


def _changes(spark: SparkSession, path: str, rng: VersionRange) -> DataFrame:
    """Rows added by the Delta versions in `rng` (an empty frame with the table's schema when
    the range is empty)."""
    if rng.empty:
        return spark.createDataFrame([], lake.table_schema(path))
    return lake.read_changes(spark, path, rng.first - 1, rng.last)


def _with_table_key(df: DataFrame, key_col: str) -> DataFrame:
    from pyspark.sql import functions as F

    return df.withColumn(TABLE_KEY, F.col(key_col))


# ---- metrics --------------------------------------------------------------------------------


def _count_if(cond: Column) -> Column:
    from pyspark.sql import functions as F

    return F.sum(F.when(cond, F.lit(1)).otherwise(F.lit(0)))


def _lateness_columns(ts: str) -> list[Column]:
    from pyspark.sql import functions as F

    lateness = F.greatest(F.col(P_BEFORE) - F.col(ts), F.lit(0))
    eligible = F.col(CLASS).isin(PUT, JOINED, LATE_CLASS)
    value = F.when(eligible, F.coalesce(lateness, F.lit(0)))
    out = [F.count(value).alias("lat_n"), F.max(value).alias("lat_max"),
           F.percentile_approx(value, [0.5, 0.95, 0.99]).alias("lat_pct")]
    lower: int | None = None
    for upper in LATENESS_BUCKETS_MS:
        cond = value <= F.lit(upper) if lower is None else (value > F.lit(lower)) & (value <= F.lit(upper))
        out.append(_count_if(cond).alias(f"lat_le_{upper}"))
        lower = upper
    out.append(_count_if(value > F.lit(lower)).alias("lat_gt"))
    return out


def _lateness(row: Any) -> LatenessStats:
    n = int(row["lat_n"] or 0)
    if n == 0:
        return LatenessStats()
    pct = row["lat_pct"] or [None, None, None]
    hist = [(f"<={b}ms", int(row[f"lat_le_{b}"] or 0)) for b in LATENESS_BUCKETS_MS]
    hist.append((f">{LATENESS_BUCKETS_MS[-1]}ms", int(row["lat_gt"] or 0)))
    return LatenessStats(records=n, max_ms=int(row["lat_max"]),
                         p50_ms=None if pct[0] is None else int(pct[0]),
                         p95_ms=None if pct[1] is None else int(pct[1]),
                         p99_ms=None if pct[2] is None else int(pct[2]),
                         histogram=tuple(hist))


# ---- one batch ------------------------------------------------------------------------------


def run_microbatch(spark: SparkSession, spec: StreamTableJoinSpec, paths: JoinPaths, *,
                   stream_source: str, table_source: str, batch_id: int | None = None,
                   columns: JoinColumns | None = None, block_rows: int = DEFAULT_BLOCK_ROWS,
                   lookup_strategy: Literal["auto", "broadcast", "shuffle"] = "auto",
                   ) -> MicroBatchReport:
    """Run the next micro-batch of the join under `paths` (or re-run a crashed one).

    stream_source: Delta table of stream events (`key`, value columns, `ts` int ms,
        `event_date`, `_seq` arrival order; see `JoinColumns` for other names).
    table_source: the versioned Delta table (`joins.operators.versioned_table` layout) when
        `spec.table.versioned`, else an unversioned changelog (`key`, values, `ts`, `tombstone`,
        `arrival`).
    batch_id: None = the next one (or the planned-but-unfinished one); an id at or below the
        last completed batch returns that batch's report with `skipped` set.
    """
    cols = columns or JoinColumns()
    log = CheckpointLog(spark, paths.checkpoints)
    planned = _plan(spark, spec, paths, log, stream_source=stream_source,
                    table_source=table_source, batch_id=batch_id)
    if isinstance(planned, MicroBatchReport):
        return planned
    return _execute(spark, spec, paths, planned, log, cols, block_rows, lookup_strategy)


@dataclass(frozen=True)
class _TableSide:
    rows_in: int | None
    stream_time: int | None
    value_cols: tuple[str, ...]
    lookups: DataFrame                # to_join rows + table_<value> columns + VALID_FROM
    state_rows: DataFrame | None      # keyed-state rows to append (unversioned tables)


def _execute(spark: SparkSession, spec: StreamTableJoinSpec, paths: JoinPaths, plan: BatchPlan,
             log: CheckpointLog, cols: JoinColumns, block_rows: int,
             lookup_strategy: Literal["auto", "broadcast", "shuffle"]) -> MicroBatchReport:
    from pyspark.sql import functions as F

    bid = plan.batch_id
    grace = spec.grace_ms
    # -- stream side: the batch's new records and the buffer it starts from, by version --------
    raw_new = _changes(spark, plan.stream_source, plan.stream)
    value_cols = list(cols.resolve_stream_values(raw_new))
    key_col = cols.lookup_key_column(spec)
    stream_cols = [cols.key, *value_cols, cols.ts, cols.event_date, cols.seq]
    if key_col not in stream_cols:
        stream_cols.append(key_col)
    require(raw_new, stream_cols, what=f"stream_source {plan.stream_source!r}")
    new = _with_table_key(raw_new.select(*stream_cols), key_col).persist()
    buffer = None
    if grace is not None and plan.buffer_version is not None:
        buffer = _with_table_key(
            lake.read_delta(spark, paths.buffer, version=plan.buffer_version).select(*stream_cols),
            key_col)
    classified: DataFrame | None = None
    joined: DataFrame | None = None
    commits: dict[str, int | None] = {}
    try:
        with phase(spark, "stream time"):
            decision = decide(new, buffer, spec, stream_cols=stream_cols, value_cols=value_cols,
                              ts=cols.ts, seq=cols.seq, stream_time_before=plan.stream_time_before,
                              block_rows=block_rows)
        classified = decision.classified.persist()
        with phase(spark, "classify"):
            stats = classified.agg(
                F.count(F.lit(1)).alias("n"),
                *(_count_if(F.col(CLASS) == c).alias(c)
                  for c in (SKIPPED_NULL_VALUE, SKIPPED_NULL_KEY, LATE_CLASS, PUT, JOINED)),
                *_lateness_columns(cols.ts)).first()
        assert stats is not None
        n_late, n_put = int(stats[LATE_CLASS] or 0), int(stats[PUT] or 0)

        with phase(spark, "table side"):
            # A checkpoint, not a cache: the as-of join's temporary views would uncache it.
            to_join = decision.to_join.localCheckpoint()
            side = _table_side(spark, spec, plan, paths, cols, to_join, lookup_strategy)
        joined = side.lookups.persist()
        beyond = F.lit(False)
        if spec.table.versioned and side.stream_time is not None:
            retention = spec.table.history_retention_ms or 0
            beyond = F.col(TABLE_KEY).isNotNull() & (F.col(cols.ts) < F.lit(side.stream_time - retention))
        matched = F.col(VALID_FROM).isNotNull()
        emitted = matched if spec.join == "inner" else F.lit(True)
        with phase(spark, "lookup"):
            out_stats = joined.agg(
                F.count(F.lit(1)).alias("looked_up"), _count_if(matched).alias("matched"),
                _count_if(F.col(LATE)).alias("late_joined"), _count_if(beyond).alias("beyond"),
                F.array_sort(F.collect_set(F.when(emitted, F.col(cols.event_date).cast("string"))))
                .alias("days")).first()
        assert out_stats is not None
        looked_up, n_matched = int(out_stats["looked_up"]), int(out_stats["matched"] or 0)
        rows_out = n_matched if spec.join == "inner" else looked_up
        evicted = looked_up - int(out_stats["late_joined"] or 0) if grace is not None else 0

        # -- commits, each idempotent (app transaction = this batch id) ------------------------
        # A write with nothing to write is skipped: the decision is a function of the plan, so
        # a re-run skips exactly the same writes.
        if rows_out:
            output = joined.where(emitted).select(
                *stream_cols, *(table_value_name(c) for c in side.value_cols), VALID_FROM,
                EMIT_SEQ, LATE, F.lit(bid).cast("long").alias(BATCH_ID))
            commits["output"] = _commit(output, paths.output, APP_OUTPUT, bid, mode="append",
                                        partition_by=[cols.event_date])
        n_quarantined = n_late if spec.late == "quarantine" else 0
        if decision.quarantine is not None and n_quarantined:
            rows = decision.quarantine.withColumn(BATCH_ID, F.lit(bid).cast("long"))
            commits["quarantine"] = _commit(rows, paths.quarantine, APP_QUARANTINE, bid, mode="append")
        if decision.buffer_after is not None and (evicted or n_put):
            commits["buffer"] = _commit(decision.buffer_after, paths.buffer, APP_BUFFER, bid,
                                        mode="overwrite")
        if side.state_rows is not None:
            commits["unversioned_table"] = _commit(side.state_rows, paths.unversioned_table,
                                                   APP_STATE, bid, mode="append")
    finally:
        for frame in (joined, classified, new):
            if frame is not None:
                frame.unpersist()

    report = MicroBatchReport(
        batch_id=bid,
        stream_versions=None if plan.stream.empty else (plan.stream.first, plan.stream.last),
        table_versions=None if plan.table.empty else (plan.table.first, plan.table.last),
        table_version=plan.table.last, commits=commits,
        rows_in_stream=int(stats["n"]), rows_in_table=side.rows_in, rows_out=rows_out,
        evicted=evicted,
        late_joined=n_late if spec.late == "join" else 0,
        late_dropped=n_late if spec.late == "drop" else 0,
        quarantined=n_quarantined,
        skipped_null_value=int(stats[SKIPPED_NULL_VALUE] or 0),
        skipped_null_key=int(stats[SKIPPED_NULL_KEY] or 0),
        inner_unmatched=looked_up - n_matched if spec.join == "inner" else 0,
        lookup_beyond_history_retention=int(out_stats["beyond"] or 0),
        # Records only enter the buffer by a put and leave it by an eviction.
        still_buffered=plan.buffered_before + n_put - evicted if grace is not None else 0,
        stream_time=decision.stream_time_after, table_stream_time=side.stream_time,
        event_days_touched=tuple(d for d in out_stats["days"] if d is not None),
        lateness=_lateness(stats))
    done = BatchDone(batch_id=bid, stream_source=plan.stream_source, table_source=plan.table_source,
                     stream_last=plan.stream.last, table_last=plan.table.last,
                     stream_time_after=decision.stream_time_after,
                     table_stream_time_after=side.stream_time, report=report.to_dict())
    with phase(spark, "done"):
        commits["checkpoints"] = log.write_done(done)
    if side.state_rows is not None and bid % COMPACT_EVERY == COMPACT_EVERY - 1:
        with phase(spark, "compact keyed state"):
            compact_unversioned_state(spark, paths, cols, side.value_cols)
    return report


def compact_unversioned_state(spark: SparkSession, paths: JoinPaths, cols: JoinColumns,
                              value_cols: tuple[str, ...]) -> int | None:
    """Rewrite the keyed state of an unversioned table as one row per live key (the append log
    grows by a row per key per batch). Content-preserving, one overwrite commit, run between
    batches: the next plan simply reads the compacted version. Returns the new Delta version."""
    from pyspark.sql import functions as F

    version = lake.delta_version(paths.unversioned_table)
    if version is None:
        return None
    keep = [cols.table_key, cols.table_ts, cols.tombstone, cols.table_arrival, *value_cols]
    state = lake.read_delta(spark, paths.unversioned_table, version=version).select(*keep)
    # A deleted key reads as absent either way, so its tombstone need not be kept.
    live = latest_per_key(state, cols=cols, value_cols=value_cols).where(~F.col(cols.tombstone))
    info = lake.write_delta(live, paths.unversioned_table, mode="overwrite",
                            commit_message=f"{OPERATOR}: compact keyed state of version {version}")
    return info.version


def _commit(df: DataFrame, path: str, app_id: str, batch_id: int, *,
            mode: Literal["append", "overwrite"], partition_by: list[str] | None = None) -> int | None:
    with phase(df.sparkSession, f"commit {app_id.rsplit('.', 1)[-1]}"):
        info = lake.write_delta(df, path, mode=mode, partition_by=partition_by,
                                app_txn=lake.AppTxn(app_id, batch_id),
                                commit_message=f"{OPERATOR}: {app_id} batch {batch_id}")
    return info.version


def _table_side(spark: SparkSession, spec: StreamTableJoinSpec, plan: BatchPlan, paths: JoinPaths,
                cols: JoinColumns, to_join: DataFrame,
                strategy: Literal["auto", "broadcast", "shuffle"]) -> _TableSide:
    from pyspark.sql import functions as F

    schema = lake.table_schema(plan.table_source)
    probe = spark.createDataFrame([], schema)
    value_cols = cols.resolve_table_values(probe)
    value_types = {c: schema[c].dataType.simpleString() for c in value_cols}
    if spec.table.versioned:
        require(probe, [cols.table_key, cols.table_ts, cols.tombstone, SEQ_BATCH, SEQ_ARRIVAL],
                what=f"versioned table_source {plan.table_source!r}")
        rows_in, stream_time = _table_changes_summary(spark, plan, cols)
        versions = lake.read_delta(spark, plan.table_source, version=plan.table.last)
        retention = spec.table.history_retention_ms
        assert retention is not None  # the spec requires it for a versioned table
        lookups = versioned_lookup(to_join, versions, cols=cols, value_cols=value_cols,
                                   value_types=value_types, history_retention_ms=retention,
                                   table_stream_time=stream_time, strategy=strategy)
        return _TableSide(rows_in, stream_time, value_cols, lookups, None)
    require(probe, [cols.table_key, cols.table_ts, cols.tombstone, cols.table_arrival],
            what=f"unversioned table_source {plan.table_source!r}")
    keep = [cols.table_key, cols.table_ts, cols.tombstone, cols.table_arrival, *value_cols]
    combined = None
    if plan.state_version is not None:
        combined = lake.read_delta(spark, paths.unversioned_table,
                                   version=plan.state_version).select(*keep)
    batch_latest = None
    rows_in = 0
    if not plan.table.empty:
        changes = _changes(spark, plan.table_source, plan.table).select(*keep)
        row = changes.agg(F.count(F.col(cols.table_key)).alias("n")).first()
        rows_in = 0 if row is None else int(row["n"])
        # The batch's own changes, last arrival per key: applied before its stream records.
        batch_latest = latest_per_key(changes, cols=cols, value_cols=value_cols)
        combined = batch_latest if combined is None else combined.unionByName(batch_latest)
    lookups = unversioned_lookup(to_join, combined, cols=cols, value_cols=value_cols,
                                 value_types=value_types)
    return _TableSide(rows_in, None, value_cols, lookups, batch_latest)


def _table_changes_summary(spark: SparkSession, plan: BatchPlan,
                           cols: JoinColumns) -> tuple[int | None, int | None]:
    """(rows the versioned table gained, its stream time after them). Stream time only grows,
    so the max over the new versions and the previous stream time is exact."""
    from pyspark.sql import functions as F

    before = plan.table_stream_time_before
    if plan.table.empty:
        return 0, before
    try:
        changes = _changes(spark, plan.table_source, plan.table)
        row = changes.agg(F.count(F.lit(1)).alias("n"), F.max(cols.table_ts).alias("m")).first()
    except lake.LakeError:
        # A compaction rewrote the table inside the range, so its added rows are no changelog:
        # read stream time from the pinned snapshot (a scan of one column) instead.
        snap = lake.read_delta(spark, plan.table_source, version=plan.table.last,
                               columns=[cols.table_ts])
        row = snap.agg(F.lit(None).cast("long").alias("n"), F.max(cols.table_ts).alias("m")).first()
    assert row is not None
    new_max = None if row["m"] is None else int(row["m"])
    after = new_max if before is None else (before if new_max is None else max(before, new_max))
    return (None if row["n"] is None else int(row["n"])), after


# The Spark replay of scenario files lives in its own module; re-exported here because
# DEFINITION.spark_replay names this module.
from joins.operators.stream_table_join.spark_replay import spark_replay  # noqa: E402
