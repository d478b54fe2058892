"""The primary-key table-table join as a pipeline: two changelog tables fed from landing
folders (kind `changelog`: every update in arrival order with its tombstone flag), each side
versioned or not, and what runs it for the Dagster layer.

The join asset holds two tables: the join's changelog (`output`, written by micro-batches:
what was emitted when) and its temporal history (`history`, written by backfills of event
days: what held when). Checks: the generic ones (the backfill agreement check compares the
history of the latest complete day with a recomputation) and `latest_equals_temporal_history`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from joins.core.human import iso_time
from joins.core.versioned import VersionedInput
from joins.operators.table_table_join.columns import BATCH_ID
from joins.operators.table_table_join.spec import TableTableJoinSpec
from joins.pipeline.sources import SourceSpec
from joins.pipeline.spec import PipelineInput, PipelineLayout, PipelineSpec
from joins.pipeline.summary import BackfillSummary, CheckSummary, DayDifference, RunSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.incremental.backfill import BackfillResult
    from joins.operators.table_table_join.backfill import Agreement
    from joins.operators.table_table_join.columns import TableTableColumns

LATEST_CHECK = "latest_equals_temporal_history"


class ChangelogSideSpec(SourceSpec):
    """A side of the join: its landing source, and how the join materialises it
    (`versioned` with `history_retention_ms`, or by arrival)."""

    versioned: StrictBool = True
    history_retention_ms: StrictInt | None = Field(default=None, ge=0)

    def versioning(self) -> VersionedInput:
        return VersionedInput(versioned=self.versioned, history_retention_ms=self.history_retention_ms)


class TableTableJoinPipeline(PipelineSpec):
    """`operator: table_table_join` (seed 000, KIP-914).

    - `left`, `right`: the two sources (one key column each, of the same type), each with
      `versioned` / `history_retention_ms`;
    - `join`: `inner` | `left` | `outer`;
    - `quarantine_expired`: updates beyond a versioned side's retention also go to the join's
      quarantine (always counted).
    """

    operator: Literal["table_table_join"]
    left: ChangelogSideSpec
    right: ChangelogSideSpec
    join: Literal["inner", "left", "outer"] = "inner"
    quarantine_expired: StrictBool = True

    def pipeline_inputs(self) -> tuple[PipelineInput, ...]:
        return (PipelineInput("left", self.left, "changelog"),
                PipelineInput("right", self.right, "changelog"))

    @model_validator(mode="after")
    def _consistent(self) -> TableTableJoinPipeline:
        who = f"{self.operator} spec {self.name!r}"
        for side, src in (("left", self.left), ("right", self.right)):
            if len(src.key_columns) != 1:
                raise self.error(f"{side}.key_columns", f"the join is on one primary-key column, got "
                                 f"{len(src.key_columns)}")
            src.versioning().check(who, f"{side}.")
        if self.left.key_columns[0].type != self.right.key_columns[0].type:
            raise self.error("right.key_columns", f"the right key is {self.right.key_columns[0].type} "
                             f"but the left key is {self.left.key_columns[0].type}")
        self.engine_spec()
        return self

    def engine_spec(self) -> TableTableJoinSpec:
        return TableTableJoinSpec.model_validate({
            "join": self.join, "left": self.left.versioning().model_dump(exclude_none=True),
            "right": self.right.versioning().model_dump(exclude_none=True)})

    def columns(self) -> TableTableColumns:
        from joins.changelog import ChangelogColumns
        from joins.operators.table_table_join.columns import TableTableColumns

        return TableTableColumns(left=ChangelogColumns(key=self.left.key_column),
                                 right=ChangelogColumns(key=self.right.key_column),
                                 left_values=self.left.value_names, right_values=self.right.value_names)

    @property
    def late_horizon_ms(self) -> int:
        return max((s.history_retention_ms or 0) for s in (self.left, self.right))

    def summary(self) -> str:
        return (f"`{self.left.name}` {self.join}-joined with `{self.right.name}` by primary key: "
                f"the join's changelog (micro-batches) and its temporal history (backfills).")

    def settings(self) -> dict[str, Any]:
        return {"operator": self.operator, "join": self.join,
                "left_versioned": self.left.versioned, "right_versioned": self.right.versioned,
                "left_history_retention_ms": self.left.history_retention_ms or -1,
                "right_history_retention_ms": self.right.history_retention_ms or -1}

    def consistency_check(self) -> tuple[str, str] | None:
        return (LATEST_CHECK, "The join's current result per key equals its temporal history at "
                              "the join's stream time (every key compared in Spark).")

    def engine(self, layout: PipelineLayout) -> TableTableJoinEngine:
        return TableTableJoinEngine(self, layout)


@dataclass(frozen=True)
class ChangelogJoinEngine:
    """What runs a join of two changelog tables for the Dagster layer (the table-table join,
    the foreign-key join): the operator's package (`package`) has `backfill.backfill` and
    `backfill.latest_agreement`; its batch log is `app`. A subclass gives `microbatch`."""

    spec: Any
    layout: PipelineLayout
    package: ClassVar[str] = "joins.operators.table_table_join"
    app: ClassVar[str] = "table_table_join"

    def _sources(self) -> dict[str, str]:
        return {"left_source": self.layout.input_table("left"),
                "right_source": self.layout.input_table("right")}

    def _backfill_module(self) -> Any:
        return importlib.import_module(f"{self.package}.backfill")

    def run_summary(self, r: Any, counters: dict[str, int]) -> RunSummary:
        """A micro-batch report (both operators' reports have these fields) as a summary."""
        for side in ("left", "right"):
            counters[f"out_of_order_ignored_{side}"] = r.out_of_order_ignored.get(side, 0)
            counters[f"expired_{side}"] = r.expired.get(side, 0)
        return RunSummary(
            batch_id=r.batch_id, skipped=r.skipped, skip_reason=r.skip_reason,
            input_versions=dict(r.versions), rows_in=dict(r.rows_in), rows_out=r.rows_out,
            quarantined=r.quarantined, stream_time=r.join_stream_time,
            event_days_touched=tuple(r.event_days_touched),
            output_version=r.commits.get("output") if r.commits else None,
            counters={} if r.skipped else counters, timings=dict(r.timings))

    def backfill(self, spark: SparkSession, days: Sequence[str], *,
                 dry_run: bool = False) -> BackfillSummary:
        return backfill_summary(self._backfill_module().backfill(
            spark, self.spec.engine_spec(), self.layout.join_root, days=list(days),
            columns=self.spec.columns(), dry_run=dry_run, **self._sources()))

    def stream_time(self) -> int | None:
        return carried_stream_time(self.layout, self.app)

    def output_identity(self) -> tuple[str, ...]:
        return (self.spec.left.key_column, BATCH_ID)

    def consistency(self, spark: SparkSession) -> CheckSummary:
        return agreement_summary(self._backfill_module().latest_agreement(
            spark, self.spec.engine_spec(), self.layout.join_root, columns=self.spec.columns(),
            **self._sources()))


@dataclass(frozen=True)
class TableTableJoinEngine(ChangelogJoinEngine):
    spec: TableTableJoinPipeline

    def microbatch(self, spark: SparkSession) -> RunSummary:
        from joins.operators.table_table_join.spark_incremental import run_microbatch

        r = run_microbatch(spark, self.spec.engine_spec(), self.layout.join_root,
                           columns=self.spec.columns(),
                           quarantine_expired=self.spec.quarantine_expired, **self._sources())
        return self.run_summary(r, {"tombstones_out": r.tombstones_out,
                                    "keys_changed": r.keys_changed})


def carried_stream_time(layout: PipelineLayout, app: str) -> int | None:
    """A two-sided changelog join's stream time: the larger of the sides' stream times that
    the last completed micro-batch carried (`<side>_stream_time`)."""
    from joins.incremental import BatchLog

    done = BatchLog(layout.join.checkpoints, app).tail().last_done
    if done is None:
        return None
    times = [t for s in ("left", "right") if (t := done.carry.get(f"{s}_stream_time")) is not None]
    return max(times) if times else None


def backfill_summary(r: BackfillResult) -> BackfillSummary:
    """A runtime backfill's result as the Dagster layer's summary."""
    return BackfillSummary(
        days=tuple(r.days), rows_in=0,
        output_version=r.commit_version if r.commit_version is not None else r.output_version_before,
        committed=r.commit_version is not None,
        per_day={d.day: DayDifference(d.rows_before, d.rows_after, d.added, d.removed, d.changed)
                 for d in r.per_day})


def agreement_summary(a: Agreement) -> CheckSummary:
    """The current results against the temporal history at stream time, as a check's verdict."""
    metadata: dict[str, int | str] = {
        "stream_time": -1 if a.stream_time is None else a.stream_time,
        "keys_incremental": a.keys_incremental, "keys_history": a.keys_history,
        "only_incremental": a.only_incremental, "only_history": a.only_history,
        "different": a.different}
    if a.stream_time is None:
        return CheckSummary(True, "nothing to compare: no micro-batch has run yet", metadata)
    if a.agrees:
        return CheckSummary(True, f"{a.keys_incremental} key(s) with a result: the current "
                                  f"results equal the temporal history at stream time "
                                  f"{iso_time(a.stream_time)}", metadata)
    return CheckSummary(False, f"{a.different} key(s) differ, {a.only_incremental} only in the "
                               f"current results, {a.only_history} only in the history at "
                               f"stream time {iso_time(a.stream_time)} (an unversioned side takes the last "
                               f"arrival, the history the latest ts)", metadata)
