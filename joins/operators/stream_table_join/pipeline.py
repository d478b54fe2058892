"""The stream-table join as a pipeline: a stream enriched with the version of a versioned
table valid at each event's time, both fed from landing folders (spec), and what runs it
(engine) for the Dagster layer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import StrictStr, model_validator

from joins.core.time import DurationMs
from joins.incremental.projection import OutputValue
from joins.landing.spec import ColumnSpec
from joins.operators.stream_table_join.columns import (
    BATCH_ID,
    EMIT_SEQ,
    LATE,
    TABLE_PREFIX,
    VALID_FROM,
)
from joins.operators.stream_table_join.spec import LatePolicy, StreamTableJoinSpec
from joins.pipeline.sources import SourceSpec
from joins.pipeline.spec import PipelineInput, PipelineSpec
from joins.pipeline.summary import BackfillSummary, DayDifference, RunSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.operators.stream_table_join.columns import JoinColumns
    from joins.pipeline.spec import PipelineLayout


class StreamTableJoinPipeline(PipelineSpec):
    """`operator: stream_table_join` (seeds 000, 001).

    - `stream`, `table`: the two sources (one key column each: the join key);
    - `join`: `inner` | `left`; `history_retention_ms`: how much event-time history the table
      keeps (also its grace for late table updates); `grace_ms`: how long stream records wait
      for out-of-order table updates (null = joined on arrival); `late`: `join` | `drop` |
      `quarantine` for stream records older than stream time - grace; `table_key`: a stream value
      column holding the table key (absent = the stream key).
    """

    operator: Literal["stream_table_join"]
    stream: SourceSpec
    table: SourceSpec
    join: Literal["inner", "left"] = "left"
    history_retention_ms: DurationMs
    grace_ms: DurationMs | None = None
    late: LatePolicy = "join"
    table_key: StrictStr | None = None

    def pipeline_inputs(self) -> tuple[PipelineInput, ...]:
        return (PipelineInput("table", self.table, "versioned", self.history_retention_ms),
                PipelineInput("stream", self.stream, "events"))

    @model_validator(mode="after")
    def _consistent(self) -> StreamTableJoinPipeline:
        for side, src in (("stream", self.stream), ("table", self.table)):
            if len(src.key_columns) != 1:
                raise self.error(f"{side}.key_columns", f"the stream-table join joins on one key "
                                 f"column, got {len(src.key_columns)} ({[c.name for c in src.key_columns]})")
        if self.stream.tombstone_column is not None:
            raise self.error("stream.tombstone_column", "a stream has no deletes (a stream record "
                             "whose value columns are all null is skipped by the join)")
        lookup = self._lookup_column()
        if lookup.type != self.table.key_columns[0].type:
            raise self.error("table_key" if self.table_key else "stream.key_columns",
                             f"the stream's lookup column {lookup.name!r} is {lookup.type} but the "
                             f"table key {self.table.key_column!r} is {self.table.key_columns[0].type}")
        clash = set(self.stream.value_names) & {TABLE_PREFIX + c for c in self.table.value_names}
        if clash:
            raise self.error("stream.value_columns", f"column(s) {sorted(clash)} would collide "
                             f"with the table's value columns in the output (they get a table_ prefix)")
        # The engine spec repeats grace/retention/late checks with its own key names; running
        # ours first keeps the keys of this spec in the message.
        if self.grace_ms is not None and self.grace_ms > self.history_retention_ms:
            raise self.error("grace_ms", f"grace_ms ({self.grace_ms}) must be <= "
                             f"history_retention_ms ({self.history_retention_ms}): a buffered record "
                             f"would be looked up in history the table no longer keeps")
        if self.grace_ms is None and self.late != "join":
            raise self.error("late", f"late = {self.late!r} needs grace_ms: without a stream "
                             f"buffer no record is ever late, so the setting would do nothing")
        self.engine_spec()
        return self

    def _lookup_column(self) -> ColumnSpec:
        if self.table_key is None:
            return self.stream.key_columns[0]
        for col in self.stream.value_columns:
            if col.name == self.table_key:
                return col
        raise self.error("table_key", f"{self.table_key!r} is not a value column of the stream "
                         f"{self.stream.name!r} (has {list(self.stream.value_names)})")

    def engine_spec(self) -> StreamTableJoinSpec:
        """The engine's operator spec (joins.operators.stream_table_join)."""
        return StreamTableJoinSpec.model_validate({
            "join": self.join,
            "table": {"versioned": True, "history_retention_ms": self.history_retention_ms},
            "grace_ms": self.grace_ms, "late": self.late, "table_key": self.table_key})

    def hold_back_ms(self) -> int:
        return self.grace_ms or 0

    def held_back_table(self, layout: PipelineLayout) -> str | None:
        from joins.operators.stream_table_join.state import JoinPaths

        return None if self.grace_ms is None else JoinPaths(layout.join_root).buffer

    @property
    def late_horizon_ms(self) -> int:
        """Late table updates are stored within history retention, late stream records are
        still joined (late = join) within it too."""
        return max(self.history_retention_ms, self.grace_ms or 0)

    def output_values(self) -> tuple[OutputValue, ...]:
        """The stream's value columns, then the table's with their `table_` prefix."""
        return tuple(OutputValue(c) for c in (*self.stream.value_names,
                                              *(TABLE_PREFIX + c for c in self.table.value_names)))

    def kept_columns(self) -> tuple[str, ...]:
        c = self.columns()
        return (c.key, c.ts, f"{c.ts}_utc", c.event_date, VALID_FROM, f"{VALID_FROM}_utc", c.seq,
                EMIT_SEQ, LATE, BATCH_ID)

    def summary(self) -> str:
        return (f"`{self.stream.name}` enriched with the `{self.table.name}` version valid at each "
                f"event's time ({self.join} join).")

    def settings(self) -> dict[str, Any]:
        return {"operator": self.operator, "join": self.join,
                "grace_ms": -1 if self.grace_ms is None else self.grace_ms, "late": self.late,
                "history_retention_ms": self.history_retention_ms}

    def engine(self, layout: PipelineLayout) -> StreamTableJoinEngine:
        return StreamTableJoinEngine(self, layout)

    def columns(self) -> JoinColumns:
        """Column roles of the lake layout: the sources keep their declared key names."""
        from joins.operators.stream_table_join.columns import JoinColumns

        return JoinColumns(key=self.stream.key_column, table_key=self.table.key_column)


@dataclass(frozen=True)
class StreamTableJoinEngine:
    spec: StreamTableJoinPipeline
    layout: PipelineLayout

    def _paths(self) -> Any:
        from joins.operators.stream_table_join.state import JoinPaths

        return JoinPaths(self.layout.join_root, self.spec.projection())

    def microbatch(self, spark: SparkSession) -> RunSummary:
        from joins.operators.stream_table_join.report import lateness_markdown, lateness_series
        from joins.operators.stream_table_join.spark_incremental import run_microbatch

        r = run_microbatch(spark, self.spec.engine_spec(), self._paths(),
                           stream_source=self.layout.input_table("stream"),
                           table_source=self.layout.input_table("table"),
                           columns=self.spec.columns())
        return RunSummary(
            batch_id=r.batch_id, skipped=r.skipped, skip_reason=r.skip_reason,
            input_versions={"stream": r.stream_versions, "table": r.table_versions},
            rows_in={"stream": r.rows_in_stream, "table": r.rows_in_table or 0},
            rows_out=r.rows_out, quarantined=r.quarantined, stream_time=r.stream_time,
            event_days_touched=tuple(r.event_days_touched),
            output_version=r.commits.get("output") if r.commits else None,
            counters={"late_joined": r.late_joined, "late_dropped": r.late_dropped,
                      "still_buffered": r.still_buffered, "evicted": r.evicted,
                      "skipped_null_value": r.skipped_null_value,
                      "inner_unmatched": r.inner_unmatched,
                      "lookup_beyond_history_retention": r.lookup_beyond_history_retention},
            details={} if r.skipped else {"lateness": lateness_markdown(r.lateness)},
            series={} if r.skipped else lateness_series(r.lateness),
            timings=dict(r.timings))

    def backfill(self, spark: SparkSession, days: Sequence[str], *,
                 dry_run: bool = False) -> BackfillSummary:
        from joins.operators.stream_table_join.backfill import backfill

        r = backfill(spark, self.spec.engine_spec(), self._paths(),
                     stream_source=self.layout.input_table("stream"),
                     table_source=self.layout.input_table("table"), days=list(days),
                     columns=self.spec.columns(), dry_run=dry_run)
        return BackfillSummary(
            days=tuple(r.days), rows_in=r.rows_in,
            output_version=r.commit_version if r.commit_version is not None else r.output_version_before,
            committed=r.commit_version is not None,
            per_day={d.day: DayDifference(d.rows_before, d.rows_after, d.added, d.removed, d.changed)
                     for d in r.per_day},
            counters={"still_buffered": r.excluded_buffered, "skipped_null_value": r.skipped_null_value})

    def stream_time(self) -> int | None:
        from joins.incremental import BatchLog
        from joins.operators.stream_table_join.state import APP

        done = BatchLog(self.layout.join.checkpoints, APP).tail().last_done
        return None if done is None else done.carry.get("stream_time")

    def output_identity(self) -> tuple[str, ...]:
        return (self.spec.columns().seq,)

    def runtime(self) -> Any:
        """The join as the runtime runs it (`joins.reproduce.Runtime`): step, batch form, tables."""
        from joins.incremental import Source
        from joins.operators.stream_table_join.backfill import StreamTableBatchForm
        from joins.operators.stream_table_join.spark_incremental import StreamTableJoinStep
        from joins.reproduce import Runtime

        step = StreamTableJoinStep(self.spec.engine_spec(), self.spec.columns())
        return Runtime(self.spec.name, step, StreamTableBatchForm(step), self._paths(),
                       {role: Source(self.layout.input_table(role)) for role in ("stream", "table")})
