"""The stream-table join on the incremental runtime, one micro-batch at a time (seeds 000, 001).

A batch takes the stream rows and table versions added since the last batch, keeps the grace
buffer (and an unversioned table's keyed state) in Delta tables, and emits join results. The
micro-batch rule of the reference engine holds: the batch's table-side rows are applied before
its stream rows, so every lookup of the batch sees the same table state (the table version the
batch's plan pins). The stream side is decided set-wise by `grace.py` (the reference processor's
answers) and looked up by `table_side.py` (only the batch's keys, never all history).

The runtime (`joins.incremental`) does the rest: the writer lease, the plan, reads by pinned
versions, idempotent commits, the done record. What this step costs in Spark actions, for a
small batch with grace on a versioned table: the decision (one task, one action that also
counts the batch; none for a batch without new stream records), the table's new versions
merged into its history held in the driver (`joins.asof.held`; a table too large to hold is
narrowed to the batch's keys and indexed instead: three jobs), and the output and buffer
writes (side by side, `joins.incremental.runner`): four jobs. The table's stream time and row
count come from Delta statistics. On two cores a small batch's time goes to planning on the
driver (the JVM thread serving the Python calls is the busiest thread), so overlapping jobs
buys little: narrowing the history while the batch is decided (any superset of the lookups
narrows correctly) gains nothing at 100 events and loses at 10k: the scan competes with the
decision for the cores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from joins import incremental
from joins.asof import HELD_MAX_ROWS
from joins.incremental import Outcome, StateTable, StepContext, StepResult, Written
from joins.incremental.reports import report_of_result
from joins.operators.stream_table_join.columns import (
    BATCH_ID,
    EMIT_SEQ,
    LATE,
    TABLE_KEY,
    VALID_FROM,
    JoinColumns,
    require,
)
from joins.operators.stream_table_join.decide import Decider
from joins.operators.stream_table_join.grace import (
    DEFAULT_BLOCK_ROWS,
    LATE_CLASS,
    PUT,
    SKIPPED_NULL_KEY,
    SKIPPED_NULL_VALUE,
    Decision,
)
from joins.operators.stream_table_join.report import (
    MIN_JOIN_TS,
    LatenessStats,
    MicroBatchReport,
    lateness_stats,
)
from joins.operators.stream_table_join.sequential import SEQUENTIAL_MAX_ROWS
from joins.operators.stream_table_join.state import APP, BUFFER, UNVERSIONED_TABLE, JoinPaths
from joins.operators.stream_table_join.table_side import (
    TableSide,
    compact_unversioned_state,
    lookup_table,
    table_value_name,
)
from joins.spark.exprs import bigint_constant, count_if, ident

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

__all__ = [
    "JoinColumns",
    "JoinPaths",
    "LatenessStats",
    "MicroBatchReport",
    "StreamTableJoinStep",
    "run_microbatch",
]

# Carried from batch to batch (BatchDone.carry).
STREAM_TIME, TABLE_STREAM_TIME, BUFFERED = "stream_time", "table_stream_time", "buffered"


@dataclass
class StreamTableJoinStep:
    """The stream-table join as an incremental operator (inputs `stream` and `table`)."""

    spec: StreamTableJoinSpec
    cols: JoinColumns
    block_rows: int = DEFAULT_BLOCK_ROWS
    lookup_strategy: Literal["auto", "broadcast", "shuffle"] = "auto"
    name: str = APP
    # Batches up to this many rows (new + buffered) are decided in one task (`decide.py`).
    sequential_max_rows: int = SEQUENTIAL_MAX_ROWS
    # A versioned table of up to this many versions is held in the driver between batches.
    held_max_rows: int = HELD_MAX_ROWS
    inputs: tuple[str, ...] = ("stream", "table")

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        tables = []
        if self.spec.grace_ms is not None:
            # Its event times' bounds are the UI's oldest and newest held record.
            tables.append(StateTable(BUFFER, "overwrite", stats_columns=(self.cols.ts,)))
        if not self.spec.table.versioned:
            tables.append(StateTable(UNVERSIONED_TABLE, "append"))
        return tuple(tables)

    def after_done(self, ctx: StepContext) -> None:
        if not self.spec.table.versioned:
            compact_unversioned_state(ctx.spark, JoinPaths(ctx.root.root), self.cols)

    def stream_columns(self, value_cols: list[str]) -> list[str]:
        cols = self.cols
        stream_cols = [cols.key, *value_cols, cols.ts, cols.event_date, cols.seq]
        key_col = cols.lookup_key_column(self.spec)
        if key_col not in stream_cols:
            stream_cols.append(key_col)
        return stream_cols

    def step(self, ctx: StepContext) -> StepResult:
        spec, cols = self.spec, self.cols
        carry = ctx.carry
        raw_new = ctx.changes("stream")
        value_cols = list(cols.resolve_stream_values(raw_new))
        stream_cols = self.stream_columns(value_cols)
        require(raw_new, stream_cols, what=f"stream_source {ctx.source_path('stream')!r}")
        # One projection each (every DataFrame call is an analysis on the driver).
        carried = [*(ident(c) for c in stream_cols),
                   f"{ident(cols.lookup_key_column(spec))} AS {TABLE_KEY}"]
        new = raw_new.selectExpr(*carried)
        buffer = None
        if spec.grace_ms is not None:
            state = ctx.state(BUFFER)
            buffer = None if state is None else state.selectExpr(*carried)
        decided = self.decider(value_cols, stream_cols).decide(
            ctx, new, buffer, ctx.change_stats("stream"), int(carry.get(BUFFERED, 0)))
        decision, row = decided.decision, decided.counts
        # The decision's count says whether any record joins now (MIN_JOIN_TS, over the new
        # records and those the buffer releases; a null ts failed the batch above): if none,
        # no lookup plan and no output write, often half a single-record replay's batches.
        to_join = None if row.get(MIN_JOIN_TS) is None else decision.to_join
        with ctx.phase("table side"):
            side = lookup_table(ctx, spec, cols, to_join, self.lookup_strategy,
                                self.held_max_rows, min_lookup_ts=row.get(MIN_JOIN_TS))
        result = self._writes(ctx, decision, side, stream_cols, row)
        return StepResult(output=result[0], quarantine=result[1], state=result[2],
                          finish=self._finisher(ctx, decision, side, row),
                          release=decided.release)

    def decider(self, value_cols: list[str], stream_cols: list[str]) -> Decider:
        cols = self.cols
        return Decider(self.spec, stream_cols, value_cols, cols.lookup_key_column(self.spec),
                       cols.ts, cols.seq, block_rows=self.block_rows,
                       sequential_max_rows=self.sequential_max_rows, name=self.name)

    def _writes(self, ctx: StepContext, decision: Decision, side: TableSide,
                stream_cols: list[str], stats: Any,
                ) -> tuple[Written | None, Written | None, dict[str, Written]]:
        from pyspark.sql import functions as F

        bid = ctx.batch_id
        output = None if side.lookups is None else self._output(ctx, decision, side, side.lookups,
                                                                stream_cols)
        # (Each frame built once: every DataFrame call is an analysis on the driver.)
        quarantine = None
        if int(stats[LATE_CLASS] or 0) and (late := decision.quarantine) is not None:
            quarantine = Written(late.withColumn(BATCH_ID, F.lit(bid).cast("long")))
        state: dict[str, Written] = {}
        # Stream time moves only by a put, and only a put or a move changes the buffer.
        if int(stats[PUT] or 0) and (buffer := decision.buffer_after) is not None:
            state[BUFFER] = Written(buffer)
        if side.state_rows is not None:
            state[UNVERSIONED_TABLE] = Written(side.state_rows)
        return output, quarantine, state

    def _output(self, ctx: StepContext, decision: Decision, side: TableSide, lookups: DataFrame,
                stream_cols: list[str]) -> Written:
        from pyspark.sql import functions as F

        spec, cols, bid = self.spec, self.cols, ctx.batch_id
        # SQL text: a few JVM calls for the whole projection (joins.spark.exprs).
        matched = f"{VALID_FROM} IS NOT NULL"
        beyond: Column | str = "false"
        if spec.table.versioned and side.retention_clock is not None:
            # Not a literal: the stage would be compiled anew every batch (its bound moves).
            bound = bigint_constant(ctx.spark, side.retention_clock - spec.table.retention_ms)
            beyond = F.col(TABLE_KEY).isNotNull() & (F.col(ident(cols.ts)) < bound)
        # Stamped on the rows where it can be: a literal batch id is written into the
        # projection's generated code, so that code would be compiled anew every batch.
        batch_id = BATCH_ID if decision.stamped else f"CAST({bid} AS BIGINT) AS {BATCH_ID}"
        columns = [*(ident(c) for c in stream_cols),
                   *(ident(table_value_name(c)) for c in side.value_cols), VALID_FROM,
                   EMIT_SEQ, LATE, batch_id]
        inner = spec.join == "inner"  # a left join emits every row: no `where("true")`
        return Written(lookups,
                       derive=lambda df: (df.where(matched) if inner else df).selectExpr(*columns),
                       metrics={"looked_up": F.expr("count(1)"), "matched": count_if(matched),
                                "late_joined": count_if(LATE), "beyond": count_if(beyond)})

    def _finisher(self, ctx: StepContext, decision: Decision, side: TableSide, stats: Any) -> Any:
        spec, carry, plan = self.spec, ctx.carry, ctx.plan
        grace = spec.grace_ms

        def finish(outcome: Outcome) -> tuple[dict[str, Any], dict[str, Any]]:
            n_late, n_put = int(stats[LATE_CLASS] or 0), int(stats[PUT] or 0)
            buffered_before = int(carry.get(BUFFERED, 0))
            still = buffered_before
            if BUFFER in outcome.tables:
                still = outcome.rows(BUFFER)
            looked_up = int(outcome.metric("output", "looked_up"))
            n_matched = int(outcome.metric("output", "matched"))
            stream_range, table_range = plan.ranges["stream"], plan.ranges["table"]
            report = MicroBatchReport(
                batch_id=plan.batch_id,
                stream_versions=None if stream_range.empty else (stream_range.first, stream_range.last),
                table_versions=None if table_range.empty else (table_range.first, table_range.last),
                table_version=table_range.last,
                rows_in_stream=int(stats["n"]), rows_in_table=side.rows_in,
                rows_out=outcome.rows("output"),
                evicted=buffered_before + n_put - still if grace is not None else 0,
                late_joined=n_late if spec.late == "join" else 0,
                late_dropped=n_late if spec.late == "drop" else 0,
                quarantined=n_late if spec.late == "quarantine" else 0,
                skipped_null_value=int(stats[SKIPPED_NULL_VALUE] or 0),
                skipped_null_key=int(stats[SKIPPED_NULL_KEY] or 0),
                inner_unmatched=looked_up - n_matched if spec.join == "inner" else 0,
                lookup_beyond_history_retention=int(outcome.metric("output", "beyond")),
                still_buffered=still if grace is not None else 0,
                stream_time=decision.stream_time_after, table_stream_time=side.stream_time,
                event_days_touched=outcome.partition_values("output", self.cols.event_date),
                lateness=lateness_stats(stats))
            next_carry = {STREAM_TIME: decision.stream_time_after,
                          TABLE_STREAM_TIME: side.stream_time, BUFFERED: report.still_buffered}
            return next_carry, report.to_dict()

        return finish


def run_microbatch(spark: SparkSession, spec: StreamTableJoinSpec, paths: JoinPaths, *,
                   stream_source: str | incremental.Source, table_source: str | incremental.Source,
                   batch_id: int | None = None,
                   columns: JoinColumns | None = None, block_rows: int = DEFAULT_BLOCK_ROWS,
                   lookup_strategy: Literal["auto", "broadcast", "shuffle"] = "auto",
                   sequential_max_rows: int = SEQUENTIAL_MAX_ROWS,
                   held_max_rows: int = HELD_MAX_ROWS,
                   wait_s: float = incremental.DEFAULT_WAIT_S,
                   lease_ttl_s: float = incremental.DEFAULT_LEASE_TTL_S) -> MicroBatchReport:
    """Run the next micro-batch of the join under `paths` (or re-run a crashed one).

    stream_source: Delta table of stream events (`key`, value columns, `ts` int ms,
        `event_date`, `_seq` arrival order; see `JoinColumns` for other names).
    table_source: the versioned Delta table (`joins.operators.versioned_table` layout) when
        `spec.table.versioned`, else an unversioned changelog (`key`, values, `ts`, `tombstone`,
        `arrival`).
    Either source may be a Delta table in its own layout (`joins.incremental.DeltaTableSource`:
    which columns are the key, the event time, the values; read as an append-only changelog).
    batch_id: None = the next one (or the planned-but-unfinished one); an id at or below the
        last completed batch returns that batch's report with `skipped` set.
    sequential_max_rows: a batch with at most this many rows (new + buffered) is decided in
        one Spark task, a larger one set-wise across the cluster (`decide.py`); 0 = always
        set-wise.
    held_max_rows: a versioned table of at most this many versions has its history held in
        the driver from batch to batch (`joins.asof.held`): a batch reads only the versions it
        added. A larger one is narrowed to each batch's keys; 0 = never held.
    """
    step = StreamTableJoinStep(spec, columns or JoinColumns(), block_rows=block_rows,
                               lookup_strategy=lookup_strategy,
                               sequential_max_rows=sequential_max_rows,
                               held_max_rows=held_max_rows)
    result = incremental.run_microbatch(spark, step, paths,
                                        {"stream": stream_source, "table": table_source},
                                        batch_id=batch_id, wait_s=wait_s,
                                        lease_ttl_s=lease_ttl_s)
    return report_of(result)


def report_of(result: incremental.BatchResult) -> MicroBatchReport:
    """The operator's report of a runtime result (a run, a re-run, or a skip)."""
    return report_of_result(result, MicroBatchReport.from_dict, lambda carry, **kw:
                            MicroBatchReport(batch_id=None, skipped=True,
                                             stream_time=carry.get(STREAM_TIME),
                                             table_stream_time=carry.get(TABLE_STREAM_TIME), **kw))
