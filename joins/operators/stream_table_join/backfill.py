"""Backfill of the stream-table join (issue 4, item 3): recompute whole event days from the full
versioned history and replace exactly those days' output rows in one commit.

Which stream records a backfill joins: those of the selected event days that the micro-batches
have already consumed (stream source at the last completed batch's version) and that no longer
wait in the grace buffer. Records still buffered, and records the micro-batches have not read
yet, will be emitted by a later micro-batch; joining them here too would duplicate them. So a
backfill and the micro-batches never both emit a record, whatever order they run in.

How they are joined: as of their own ts, against the versioned table at its latest Delta
version, without the history-retention rule: a micro-batch answers get(key, ts) with the
versions that had arrived by then and within retention of the table's stream time; a backfill
has every version that arrived since, which is the point of running it. With grace covering the
data's disorder (no table version arrives after a stream record it should answer was joined, no
stream record late), the backfill reproduces the micro-batch rows for those days row for row;
otherwise the report counts, per day, the rows added, removed and changed (a late stream record
that `drop` or `quarantine` kept out of the micro-batch output is joined here and counts as
added).

The old rows are read at a pinned output version and compared to the new ones by stream arrival
index (`_seq`: one output row per stream record) before the one `replace_partitions` commit.
When nothing differs there is no commit: the rows, and their micro-batch lineage columns
(`_batch_id`, `_emit_seq`), stay as they are.
A backfill refuses to run while a micro-batch is half committed (its rows may be in the output
already, or not yet; either way the days are not at rest).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
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
from joins.operators.stream_table_join.grace import SKIPPED_NULL_VALUE, classify
from joins.operators.stream_table_join.phases import phase
from joins.operators.stream_table_join.state import (
    BatchStateError,
    CheckpointLog,
    JoinPaths,
    check_progress,
)
from joins.operators.stream_table_join.table_side import table_value_name, versioned_lookup

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

_SIDE = "_side"
_DIFF = "_diff"
ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"


@dataclass(frozen=True)
class DayDiff:
    """Output rows of one event day before and after the backfill, and how they differ."""

    day: str
    rows_before: int = 0
    rows_after: int = 0
    added: int = 0
    removed: int = 0
    changed: int = 0


@dataclass(frozen=True)
class BackfillReport:
    """What a backfill did. `difference` is the sum over days; empty means the micro-batches
    had already produced exactly these rows."""

    days: tuple[str, ...]
    last_batch_id: int | None             # the micro-batch the backfill is consistent with
    stream_version: int | None            # stream source version read (consumed by batches)
    table_version: int                    # versioned table version joined against
    output_version_before: int | None
    commit_version: int | None            # the replace commit (None: nothing to replace)
    rows_in: int = 0                      # stream records of those days joined
    excluded_buffered: int = 0            # still in the grace buffer: a micro-batch emits them
    skipped_null_value: int = 0
    rows_before: int = 0
    rows_after: int = 0
    added: int = 0
    removed: int = 0
    changed: int = 0
    per_day: tuple[DayDiff, ...] = field(default_factory=tuple)

    @property
    def agrees(self) -> bool:
        """True when the backfill changed nothing (micro-batches and backfill agree)."""
        return self.added == 0 and self.removed == 0 and self.changed == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agrees": self.agrees}


def _parse_days(days: Sequence[str | dt.date]) -> list[dt.date]:
    if isinstance(days, str) or not days:
        raise ConfigError(f"{OPERATOR}: backfill days must be a non-empty list of dates "
                          f"(YYYY-MM-DD), got {days!r}")
    parsed: list[dt.date] = []
    for day in days:
        if isinstance(day, dt.datetime):
            raise ConfigError(f"{OPERATOR}: backfill day {day!r} is a datetime; give a date")
        if isinstance(day, dt.date):
            parsed.append(day)
            continue
        try:
            parsed.append(dt.date.fromisoformat(str(day)))
        except ValueError:
            raise ConfigError(f"{OPERATOR}: backfill day {day!r} is not a date (YYYY-MM-DD)") from None
    return sorted(set(parsed))


def _read_days(spark: SparkSession, path: str, column: str, days: list[dt.date], *,
               version: int | None) -> DataFrame:
    """The rows of `days`, by partition pruning when `column` partitions the table."""
    from pyspark.sql import functions as F

    try:
        return lake.read_delta(spark, path, version=version, partitions={column: days})
    except lake.LakeError:
        # Not partitioned by the day column: filter instead.
        return lake.read_delta(spark, path, version=version).where(F.col(column).isin(days))


def backfill(spark: SparkSession, spec: StreamTableJoinSpec, paths: JoinPaths, *,
             stream_source: str, table_source: str, days: Sequence[str | dt.date],
             columns: JoinColumns | None = None,
             lookup_strategy: Literal["auto", "broadcast", "shuffle"] = "auto") -> BackfillReport:
    """Recompute the join for `days` (event dates of the stream records) and replace exactly
    those days' output rows in one commit; report the difference to what was there."""
    from pyspark.sql import functions as F

    cols = columns or JoinColumns()
    if not spec.table.versioned:
        raise ConfigError(f"{OPERATOR}: a backfill needs a versioned table (table.versioned = true): "
                          f"an unversioned table keeps no event-time history to recompute from")
    wanted = _parse_days(days)
    log = CheckpointLog(spark, paths.checkpoints)
    with phase(spark, "backfill plan"):
        tail = log.state()
    if tail.pending is not None:
        raise BatchStateError(f"{OPERATOR}: micro-batch {tail.pending.batch_id} under {paths.root} "
                              f"is planned but not completed; run it before a backfill")
    done = tail.last_done
    table_version = lake.delta_version(table_source)
    if table_version is None:
        raise ConfigError(f"{OPERATOR}: table_source {table_source!r} is not a Delta table")
    if done is not None:
        stream_last = lake.delta_version(stream_source)
        if stream_last is None:
            raise ConfigError(f"{OPERATOR}: stream_source {stream_source!r} is not a Delta table")
        check_progress(done, stream_last=stream_last, table_last=table_version, root=paths.root)
    output_before = lake.delta_version(paths.output)
    day_strings = tuple(d.isoformat() for d in wanted)
    if done is None:
        # No micro-batch has consumed anything: every record of these days is still ahead of
        # the micro-batches, so the backfill must emit nothing for them.
        return BackfillReport(days=day_strings, last_batch_id=None, stream_version=None,
                              table_version=table_version, output_version_before=output_before,
                              commit_version=None)

    stream = _read_days(spark, stream_source, cols.event_date, wanted, version=done.stream_last)
    value_cols = list(cols.resolve_stream_values(stream))
    key_col = cols.lookup_key_column(spec)
    stream_cols = [cols.key, *value_cols, cols.ts, cols.event_date, cols.seq]
    if key_col not in stream_cols:
        stream_cols.append(key_col)
    require(stream, stream_cols, what=f"stream_source {stream_source!r}")
    records = stream.select(*stream_cols).withColumn(TABLE_KEY, F.col(key_col))
    buffered_version = lake.delta_version(paths.buffer) if spec.grace_ms is not None else None
    buffered = None
    if buffered_version is not None:
        buffered = lake.read_delta(spark, paths.buffer, version=buffered_version,
                                   columns=[cols.seq]).withColumnRenamed(cols.seq, "_buffered_seq")
    is_buffered = F.lit(False)
    if buffered is not None:
        records = records.join(F.broadcast(buffered), records[cols.seq] == buffered["_buffered_seq"],
                               "left")
        is_buffered = F.col("_buffered_seq").isNotNull()
    skipped = classify(records, spec, value_cols=value_cols)
    marked = records.withColumn("_skip", skipped).withColumn("_held", is_buffered)

    table_schema = lake.table_schema(table_source)
    probe = spark.createDataFrame([], table_schema)
    table_values = cols.resolve_table_values(probe)
    value_types = {c: table_schema[c].dataType.simpleString() for c in table_values}
    cached: list[DataFrame] = []
    try:
        marked = marked.persist()
        cached.append(marked)
        with phase(spark, "backfill read"):
            counts = marked.agg(
                F.count(F.lit(1)).alias("n"),
                _count_if(F.col("_held")).alias("held"),
                _count_if(~F.col("_held") & (F.col("_skip") == SKIPPED_NULL_VALUE)).alias("null_value"),
            ).first()
        assert counts is not None
        lookups = marked.where(~F.col("_held") & F.col("_skip").isNull()).select(
            *stream_cols, TABLE_KEY).localCheckpoint()
        versions = lake.read_delta(spark, table_source, version=table_version)
        joined = versioned_lookup(lookups, versions, cols=cols, value_cols=table_values,
                                  value_types=value_types, history_retention_ms=None,
                                  table_stream_time=None, strategy=lookup_strategy)
        if spec.join == "inner":
            joined = joined.where(F.col(VALID_FROM).isNotNull())
        new = joined.select(
            *stream_cols, *(table_value_name(c) for c in table_values), VALID_FROM,
            F.lit(None).cast("long").alias(EMIT_SEQ), F.lit(False).alias(LATE),
            F.lit(None).cast("long").alias(BATCH_ID)).persist()
        cached.append(new)
        compared = [*stream_cols, *(table_value_name(c) for c in table_values), VALID_FROM]
        old = None
        if output_before is not None:
            old = _read_days(spark, paths.output, cols.event_date, wanted, version=output_before)
        with phase(spark, "backfill diff"):
            per_day = _diff(new, old, seq=cols.seq, day=cols.event_date, compared=compared)
        commit_version = None
        # Nothing differs: the rows (and their micro-batch lineage) stay as they are.
        if any(d.added or d.removed or d.changed for d in per_day):
            with phase(spark, "backfill commit"):
                info = lake.write_delta(
                    new, paths.output, mode="overwrite", partition_by=[cols.event_date],
                    replace_partitions={cols.event_date: list(wanted)},
                    commit_message=f"{OPERATOR}: backfill of {', '.join(day_strings)} "
                                   f"(consistent with batch {done.batch_id})")
            commit_version = info.version
    finally:
        for frame in cached:
            frame.unpersist()
    per_day_all = tuple(next((d for d in per_day if d.day == s), DayDiff(s)) for s in day_strings)
    return BackfillReport(
        days=day_strings, last_batch_id=done.batch_id, stream_version=done.stream_last,
        table_version=table_version, output_version_before=output_before,
        commit_version=commit_version, rows_in=int(counts["n"]) - int(counts["held"] or 0),
        excluded_buffered=int(counts["held"] or 0), skipped_null_value=int(counts["null_value"] or 0),
        rows_before=sum(d.rows_before for d in per_day_all),
        rows_after=sum(d.rows_after for d in per_day_all),
        added=sum(d.added for d in per_day_all), removed=sum(d.removed for d in per_day_all),
        changed=sum(d.changed for d in per_day_all), per_day=per_day_all)


def _count_if(cond: Column) -> Column:
    from pyspark.sql import functions as F

    return F.sum(F.when(cond, F.lit(1)).otherwise(F.lit(0)))


def _diff(new: DataFrame, old: DataFrame | None, *, seq: str, day: str,
          compared: list[str]) -> list[DayDiff]:
    """Per day: rows before/after, and rows added, removed or changed, matched by `seq`."""
    from pyspark.sql import functions as F

    def side(df: DataFrame, name: str) -> DataFrame:
        return df.select(F.col(seq).alias("_k"), F.struct(*compared).alias(name),
                         F.col(day).cast("string").alias(f"{name}_day"))

    right = side(new, "_new")
    if old is None:
        merged = right.withColumn("_old", F.lit(None)).withColumn("_old_day", F.lit(None).cast("string"))
    else:
        merged = side(old, "_old").join(right, "_k", "full_outer")
    has_old, has_new = F.col("_old").isNotNull(), F.col("_new").isNotNull()
    kind = (F.when(has_old & has_new & ~F.col("_old").eqNullSafe(F.col("_new")), F.lit(CHANGED))
            .when(has_old & has_new, F.lit(SAME))
            .when(has_new, F.lit(ADDED)).otherwise(F.lit(REMOVED)))
    rows = (merged.withColumn(_DIFF, kind)
            .withColumn("_day", F.coalesce(F.col("_new_day"), F.col("_old_day")))
            .groupBy("_day").agg(
                _count_if(has_old).alias("before"), _count_if(has_new).alias("after"),
                *(_count_if(F.col(_DIFF) == k).alias(k) for k in (ADDED, REMOVED, CHANGED)))
            .collect())
    return sorted((DayDiff(day=r["_day"], rows_before=int(r["before"]), rows_after=int(r["after"]),
                           added=int(r[ADDED]), removed=int(r[REMOVED]), changed=int(r[CHANGED]))
                   for r in rows), key=lambda d: d.day)
