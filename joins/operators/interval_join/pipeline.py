"""The interval join as a pipeline: two event streams joined within time bounds, both fed from
landing folders (spec), and what runs it (engine) for the Dagster layer.

Each source's columns are named `<source>.<column>` in the join (its key and value columns, and
its event time under the source's `ts_column` name), so the condition reads like SQL over the
two streams: `deliveries.delivery_time BETWEEN orders.order_time AND orders.order_time +
INTERVAL '1' HOUR AND deliveries.order_id = orders.order_id`. In the output they are
`<source>_<column>` (`orders_order_time`).

Watermarks are derived: after each micro-batch, every time column of a side gets max event time
seen - the side's allowed lag (`left_lag_ms`, `right_lag_ms`). Inside a batch the left rows come
before the right ones (two tables have no common arrival order).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, StrictInt, StrictStr, model_validator

from joins.core.human import iso_time
from joins.core.time import DurationMs
from joins.errors import ConfigError
from joins.incremental.projection import OutputValue
from joins.operators.interval_join.columns import BATCH_ID, EVENT_DATE, JoinLayout
from joins.operators.interval_join.spec import IntervalJoinSpec, JoinType, LatePolicy
from joins.pipeline.sources import SourceSpec
from joins.pipeline.spec import PipelineInput, PipelineSpec
from joins.pipeline.summary import BackfillSummary, DayDifference, RunSummary
from joins.sql import SIDES, Side

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.operators.interval_join.report import IntervalBatchReport
    from joins.operators.interval_join.spark_incremental import IntervalJoinStep
    from joins.pipeline.spec import PipelineLayout

EVENTS_TS = "ts"  # the events table keeps a source's event time under this name
# Declared column types as the key rule sees them (`joins.sql.spark.spark_kind`).
_KEY_KINDS = {"long": "long", "int": "long", "double": "double", "string": "string", "boolean": "boolean"}


class IntervalJoinPipeline(PipelineSpec):
    """`operator: interval_join` (seed 003).

    - `left`, `right`: the two event streams (sources of kind events);
    - `condition`: the ON clause over `<source>.<column>` names, with a constant time bound in
      each direction; `join`: `inner` | `left` | `right` | `full`;
    - `left_lag_ms`, `right_lag_ms`: how far behind its max event time each stream's watermark
      stays (rows older than the watermark are late);
    - `late`: `drop` (counted) | `quarantine` (kept with the reason);
    - `max_buffered_rows`: a micro-batch that would buffer more (both sides) fails, naming the
      side and the limit, with nothing committed; `bin_ms`: the time-bin width of the pairs join.
    """

    operator: Literal["interval_join"]
    left: SourceSpec
    right: SourceSpec
    condition: StrictStr
    join: JoinType = "inner"
    left_lag_ms: DurationMs
    right_lag_ms: DurationMs
    late: LatePolicy = "quarantine"
    max_buffered_rows: StrictInt | None = Field(default=None, ge=1)
    bin_ms: StrictInt | None = Field(default=None, ge=1)

    def pipeline_inputs(self) -> tuple[PipelineInput, ...]:
        return (PipelineInput("left", self.left, "events"), PipelineInput("right", self.right, "events"))

    def source(self, side: Side) -> SourceSpec:
        return self.left if side == "left" else self.right

    @model_validator(mode="after")
    def _consistent(self) -> IntervalJoinPipeline:
        for side in SIDES:
            if self.source(side).tombstone_column is not None:
                raise self.error(f"{side}.tombstone_column", "an event stream has no deletes")
        try:
            spec = self.engine_spec()
        except ConfigError as exc:
            raise self.error("condition", str(exc).split("config.condition: ", 1)[-1]) from None
        # The key rule: values of different types are different keys (1, 1.0 and "1"), so a key
        # equality of two declared columns of different types would never let a pair join.
        kinds = {side: self._key_kinds(side) for side in SIDES}
        for column in spec.plan.time_columns:
            kind = kinds[column.side].get(column.name)
            if kind is not None and kind != "long":
                raise self.error("condition", (
                    f"`{column.name}` is a time column of the condition (a bound between the "
                    f"inputs reads it) but is declared {kind}: time columns hold epoch "
                    f"milliseconds, declared long or int"))
        for left, right in spec.plan.equi_keys:
            lk, rk = kinds["left"].get(left.name), kinds["right"].get(right.name)
            if lk is not None and rk is not None and lk != rk:
                raise self.error("condition", (
                    f"`{left.name} = {right.name}` compares a {lk} key with a {rk} one: keys "
                    f"of different types never match (1, 1.0 and \"1\" are different keys), so "
                    f"no pair would join; declare both columns with one type"))
        return self

    def _key_kinds(self, side: Side) -> dict[str, str]:
        """Join column name -> the kind its declared type has under the key rule."""
        src = self.source(side)
        kinds = {f"{src.name}.{c.name}": _KEY_KINDS[c.type] for c in (*src.key_columns, *src.value_columns)}
        kinds[f"{src.name}.{src.ts_column}"] = "long"
        return kinds

    def columns(self, side: Side) -> dict[str, str]:
        """Join column name (`orders.order_time`) -> events table column (`ts` for the time)."""
        src = self.source(side)
        out = {f"{src.name}.{c.name}": c.name for c in (*src.key_columns, *src.value_columns)}
        out[f"{src.name}.{src.ts_column}"] = EVENTS_TS
        return out

    def engine_spec(self) -> IntervalJoinSpec:
        return IntervalJoinSpec.model_validate({
            "join": self.join, "condition": self.condition,
            "left_columns": list(self.columns("left")), "right_columns": list(self.columns("right")),
            "max_buffered_rows": self.max_buffered_rows, "late": self.late})

    def hold_back_ms(self) -> int:
        """Rows are final once the output watermarks passed them by the largest postpone time."""
        return max((abs(b.postpone_ms) for b in self.engine_spec().plan.bounds), default=0)

    @property
    def late_horizon_ms(self) -> int:
        return max(self.left_lag_ms, self.right_lag_ms) + self.hold_back_ms()

    def output_values(self) -> tuple[OutputValue, ...]:
        """Both sources' key and value columns as the output names them (`<source>_<column>`)."""
        layout = JoinLayout.of(self.engine_spec())
        times = set(self._times(layout))
        return tuple(OutputValue(n) for n in layout.output_columns() if n not in times)

    def kept_columns(self) -> tuple[str, ...]:
        times = self._times(JoinLayout.of(self.engine_spec()))
        return (*(n for t in times for n in (t, f"{t}_utc")), BATCH_ID, EVENT_DATE)

    def _times(self, layout: JoinLayout) -> list[str]:
        """The output names of the two event-time columns."""
        return [layout.sides[side].output(f"{self.source(side).name}.{self.source(side).ts_column}")
                for side in SIDES]

    def summary(self) -> str:
        return (f"`{self.left.name}` {self.join}-joined with `{self.right.name}` within time bounds: "
                f"{self.condition}.")

    def settings(self) -> dict[str, Any]:
        return {"operator": self.operator, "join": self.join, "condition": self.condition,
                "left_lag_ms": self.left_lag_ms, "right_lag_ms": self.right_lag_ms,
                "late": self.late,
                "max_buffered_rows": -1 if self.max_buffered_rows is None else self.max_buffered_rows}

    def engine(self, layout: PipelineLayout) -> IntervalJoinEngine:
        return IntervalJoinEngine(self, layout)


@dataclass(frozen=True)
class IntervalJoinEngine:
    spec: IntervalJoinPipeline
    layout: PipelineLayout

    @cached_property
    def step(self) -> IntervalJoinStep:
        from joins.operators.interval_join.spark_incremental import IntervalJoinStep

        engine_spec = self.spec.engine_spec()
        layout = JoinLayout.of(engine_spec, inputs={s: self.spec.columns(s) for s in SIDES})
        return IntervalJoinStep(engine_spec, layout,
                                lag_ms={"left": self.spec.left_lag_ms, "right": self.spec.right_lag_ms},
                                order="left_first", bin_ms=self.spec.bin_ms)

    def _sources(self) -> dict[str, str]:
        return {s: self.layout.input_table(s) for s in SIDES}

    def runtime(self) -> Any:
        """The join as the runtime runs it (`joins.reproduce.Runtime`): step, batch form, tables."""
        from joins.incremental import Source
        from joins.operators.interval_join.backfill import IntervalBatchForm
        from joins.reproduce import Runtime

        return Runtime(self.spec.name, self.step, IntervalBatchForm(self.step), self.layout.join,
                       {role: Source(path) for role, path in self._sources().items()})

    def microbatch(self, spark: SparkSession) -> RunSummary:
        from joins.incremental import run_microbatch
        from joins.operators.interval_join.report import report_of

        r = report_of(run_microbatch(spark, self.step, self.layout.join, self._sources()))
        return RunSummary(
            batch_id=r.batch_id, skipped=r.skipped, skip_reason=r.skip_reason,
            input_versions=dict(r.input_versions), rows_in=dict(r.rows_in), rows_out=r.rows_out,
            quarantined=r.quarantined, stream_time=self.stream_time(),
            event_days_touched=r.event_days_touched, output_version=r.commits.get("output"),
            counters={} if r.skipped else counters(r), timings=dict(r.timings),
            times={} if r.skipped else watermark_times(r),
            details={} if r.skipped else {"watermarks": watermarks_markdown(r)})

    def backfill(self, spark: SparkSession, days: Sequence[str], *,
                 dry_run: bool = False) -> BackfillSummary:
        """Backfill the complete days among `days` (a day the micro-batches may still add to
        is left out and counted: `incomplete_days`)."""
        from joins.incremental import BatchLog
        from joins.operators.interval_join.backfill import backfill, day_complete, settled_until

        done = BatchLog(self.layout.join.checkpoints, self.step.name).tail().last_done
        settled = None if done is None else settled_until(self.step, done.carry)
        complete = [d for d in sorted(days) if day_complete(dt.date.fromisoformat(d), settled)]
        skipped = len(days) - len(complete)
        if not complete:
            return BackfillSummary(days=tuple(days), rows_in=0, output_version=None, committed=False,
                                   counters={"incomplete_days": skipped})
        r = backfill(spark, self.step, self.layout.join, left_source=self._sources()["left"],
                     right_source=self._sources()["right"], days=complete, dry_run=dry_run)
        return BackfillSummary(
            days=tuple(r.days), rows_in=0,
            output_version=r.commit_version if r.commit_version is not None else r.output_version_before,
            committed=r.commit_version is not None,
            per_day={d.day: DayDifference(d.rows_before, d.rows_after, d.added, d.removed, d.changed)
                     for d in r.per_day},
            counters={"incomplete_days": skipped})

    def stream_time(self) -> int | None:
        """The smallest output watermark of the time columns: no output row below it will come
        (None before every time column has one)."""
        from joins.incremental import BatchLog
        from joins.operators.interval_join.timeline import state_of

        done = BatchLog(self.layout.join.checkpoints, self.step.name).tail().last_done
        if done is None:
            return None
        state = state_of(done.carry, self.step.spec.plan)
        values = [state.last_emitted.get(c) for c in self.step.spec.plan.time_columns]
        return None if any(v is None for v in values) else min(v for v in values if v is not None)

    def output_identity(self) -> tuple[str, ...]:
        return ("_seq",)


def counters(r: IntervalBatchReport) -> dict[str, int]:
    """Numeric metadata (Dagster plots it over the materializations): buffered rows per side,
    late rows, null-padded (outer) rows."""
    out: dict[str, int] = {"joined_rows": r.joined_rows}
    for side in SIDES:
        out[f"buffered_{side}"] = r.buffered_after[side]
        out[f"late_{side}"] = r.late_dropped[side] + r.late_quarantined[side]
        out[f"outer_rows_{side}"] = r.null_padded[side]
        out[f"evicted_{side}"] = r.evicted[side]
        out[f"out_of_bounds_{side}"] = r.out_of_bounds[side]
    return out


def watermark_times(r: IntervalBatchReport) -> dict[str, int]:
    """The watermarks per column after the batch, received and emitted: event times (shown as
    times, not plotted as numbers of milliseconds)."""
    out = {f"watermark_in_{_metadata_name(n)}": v for n, v in r.watermarks_in.items()}
    out |= {f"watermark_out_{_metadata_name(n)}": v for n, v in r.watermarks_out.items()}
    return out


def _metadata_name(name: str) -> str:
    return name.replace(".", "_")


def watermarks_markdown(r: IntervalBatchReport) -> str:
    """The watermarks after the batch: per column, the last received and the last emitted."""
    names = sorted(set(r.watermarks_in) | set(r.watermarks_out))
    if not names:
        return "No watermark yet."
    lines = ["| column | input watermark | output watermark |", "|---|---|---|"]
    for name in names:
        lines.append(f"| {name} | {_utc(r.watermarks_in.get(name))} | "
                     f"{_utc(r.watermarks_out.get(name))} |")
    return "\n".join(lines)


def _utc(ms: int | None) -> str:
    return "-" if ms is None else iso_time(ms)
