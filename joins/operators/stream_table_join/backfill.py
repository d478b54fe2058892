"""Backfill of the stream-table join: recompute whole event days from the full versioned
history; the runtime (`joins.incremental.backfill`) replaces exactly those days in one commit.

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
added). Rows are matched by stream arrival index (`_seq`: one output row per stream record).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from joins import lake
from joins.errors import ConfigError
from joins.incremental import Source
from joins.incremental.backfill import (
    BackfillContext,
    BackfillResult,
    BackfillRows,
    DayDiff,
    run_backfill,
)
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
from joins.operators.stream_table_join.spark_incremental import StreamTableJoinStep
from joins.operators.stream_table_join.state import BUFFER, JoinPaths
from joins.operators.stream_table_join.table_side import table_value_name, versioned_lookup
from joins.spark.exprs import count_if

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

__all__ = ["BackfillReport", "DayDiff", "backfill"]


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


@dataclass
class StreamTableBatchForm:
    step: StreamTableJoinStep
    lookup_strategy: Literal["auto", "broadcast", "shuffle"] = "auto"

    def backfill_rows(self, ctx: BackfillContext, days: list[dt.date]) -> BackfillRows:
        from pyspark.sql import functions as F

        spec, cols, spark = self.step.spec, self.step.cols, ctx.spark
        if not spec.table.versioned:
            raise ConfigError(f"{OPERATOR}: a backfill needs a versioned table (table.versioned = "
                              f"true): an unversioned table keeps no event-time history to "
                              f"recompute from")
        table_source = ctx.sources["table"].path
        table_version = ctx.sources["table"].version()
        if table_version is None:
            raise ConfigError(f"{OPERATOR}: table_source {table_source!r} is not a Delta table")
        counts: dict[str, Any] = {"table_version": table_version, "stream_version": None}
        stream_last = ctx.consumed("stream")
        if stream_last is None:
            # No micro-batch has consumed anything: every record of these days is still ahead
            # of the micro-batches, so the backfill must emit nothing for them.
            return BackfillRows(None, counts=counts)
        counts["stream_version"] = stream_last
        stream = ctx.sources["stream"].rows_of_days(spark, stream_last, days)
        value_cols = list(cols.resolve_stream_values(stream))
        stream_cols = self.step.stream_columns(value_cols)
        require(stream, stream_cols, what=f"stream_source {ctx.sources['stream'].path!r}")
        records = stream.select(*stream_cols).withColumn(
            TABLE_KEY, F.col(cols.lookup_key_column(spec)))
        buffer_path = JoinPaths(ctx.root.root).buffer
        buffered_version = ctx.state_version(BUFFER) if spec.grace_ms is not None else None
        is_buffered = F.lit(False)
        if buffered_version is not None:
            held = lake.read_delta(spark, buffer_path, version=buffered_version,
                                   columns=[cols.seq]).withColumnRenamed(cols.seq, "_buffered_seq")
            records = records.join(F.broadcast(held), records[cols.seq] == held["_buffered_seq"], "left")
            is_buffered = F.col("_buffered_seq").isNotNull()
        marked = records.withColumn("_skip", classify(records, spec, value_cols=value_cols)) \
            .withColumn("_held", is_buffered).persist()
        with ctx.phase("backfill read"):
            row = marked.agg(
                F.count(F.lit(1)).alias("n"), count_if(F.col("_held")).alias("held"),
                count_if(~F.col("_held") & (F.col("_skip") == SKIPPED_NULL_VALUE)).alias("null_value"),
            ).first()
        assert row is not None
        held_n = int(row["held"] or 0)
        counts.update(rows_in=int(row["n"]) - held_n, excluded_buffered=held_n,
                      skipped_null_value=int(row["null_value"] or 0))
        lookups = marked.where(~F.col("_held") & F.col("_skip").isNull()).select(
            *stream_cols, TABLE_KEY).localCheckpoint()
        table_schema = ctx.sources["table"].schema(spark, table_version)
        table_values = cols.resolve_table_values(table_schema)
        value_types = {c: table_schema[c].dataType.simpleString() for c in table_values}
        versions = ctx.sources["table"].snapshot(spark, table_version)
        joined = versioned_lookup(lookups, versions, cols=cols, value_cols=table_values,
                                  value_types=value_types, history_retention_ms=None,
                                  table_stream_time=None, strategy=self.lookup_strategy)
        if spec.join == "inner":
            joined = joined.where(F.col(VALID_FROM).isNotNull())
        compared = (*stream_cols, *(table_value_name(c) for c in table_values), VALID_FROM)
        rows = joined.select(
            *compared, F.lit(None).cast("long").alias(EMIT_SEQ), F.lit(False).alias(LATE),
            F.lit(None).cast("long").alias(BATCH_ID))
        return BackfillRows(rows, identity=(cols.seq,), compared=compared, counts=counts,
                            release=marked.unpersist)


def backfill(spark: SparkSession, spec: StreamTableJoinSpec, paths: JoinPaths, *,
             stream_source: str | Source, table_source: str | Source,
             days: Sequence[str | dt.date],
             columns: JoinColumns | None = None,
             lookup_strategy: Literal["auto", "broadcast", "shuffle"] = "auto",
             dry_run: bool = False, **lease: float) -> BackfillReport:
    """Recompute the join for `days` (event dates of the stream records) and replace exactly
    those days' output rows in one commit; report the difference to what was there. With
    `dry_run` nothing is committed (the report says what a backfill would change). `lease`:
    `wait_s` / `lease_ttl_s` of the join's writer lease (joins.incremental.run_backfill)."""
    step = StreamTableJoinStep(spec, columns or JoinColumns(), lookup_strategy=lookup_strategy)
    result = run_backfill(spark, step, StreamTableBatchForm(step, lookup_strategy), paths,
                          {"stream": stream_source, "table": table_source}, days, dry_run=dry_run,
                          **lease)
    return report_of(result)


def report_of(r: BackfillResult) -> BackfillReport:
    c = r.counts
    return BackfillReport(
        days=r.days, last_batch_id=r.last_batch_id, stream_version=c.get("stream_version"),
        table_version=c["table_version"], output_version_before=r.output_version_before,
        commit_version=r.commit_version, rows_in=c.get("rows_in", 0),
        excluded_buffered=c.get("excluded_buffered", 0),
        skipped_null_value=c.get("skipped_null_value", 0),
        rows_before=sum(d.rows_before for d in r.per_day),
        rows_after=sum(d.rows_after for d in r.per_day),
        added=r.added, removed=r.removed, changed=r.changed, per_day=r.per_day)
