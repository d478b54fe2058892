"""What runs a join of two changelog tables for the Dagster layer (the table-table join, the
foreign-key join): a side's source spec, the micro-batch report as a summary, backfills, the
join's stream time and the check that its current results equal its temporal history."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import StrictBool

from joins.changelog.result import (
    BATCH_ID,
    EMIT_SEQ,
    EVENT_DATE,
    SIDES,
    TOMBSTONE,
    TS,
    VALID_FROM,
    VALID_TO,
    has,
)
from joins.core.human import iso_time
from joins.core.time import DurationMs
from joins.core.versioned import VersionedInput
from joins.incremental.projection import OutputValue
from joins.pipeline.sources import SourceSpec
from joins.pipeline.spec import PipelineInput, PipelineLayout, PipelineSpec
from joins.pipeline.summary import BackfillSummary, CheckSummary, DayDifference, RunSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.changelog.agreement import Agreement
    from joins.incremental.backfill import BackfillResult

LATEST_CHECK = "latest_equals_temporal_history"


class ChangelogSideSpec(SourceSpec):
    """A side of the join: its landing source, and how the join materialises it
    (`versioned` with `history_retention_ms`, or by arrival)."""

    versioned: StrictBool = True
    history_retention_ms: DurationMs | None = None

    def versioning(self) -> VersionedInput:
        return VersionedInput(versioned=self.versioned, history_retention_ms=self.history_retention_ms)


class TwoTablePipeline(PipelineSpec):
    """What every join of two changelog tables' pipeline has: `left` and `right` (one primary-key
    column each, versioned or by arrival) and `quarantine_expired`. A subclass's validator calls
    `check_sides()` first."""

    left: ChangelogSideSpec
    right: ChangelogSideSpec
    quarantine_expired: StrictBool = True

    def pipeline_inputs(self) -> tuple[PipelineInput, ...]:
        return (PipelineInput("left", self.left, "changelog"),
                PipelineInput("right", self.right, "changelog"))

    def output_values(self) -> tuple[OutputValue, ...]:
        """Each side's value columns with the side's prefix (`left_status`, `right_name`)."""
        cols = self.columns()
        return tuple(OutputValue(c) for side in SIDES for c in cols.out_values(side))

    def kept_columns(self) -> tuple[str, ...]:
        return (self.left.key_column, *(has(s) for s in SIDES), TS, f"{TS}_utc", TOMBSTONE,
                EVENT_DATE, VALID_FROM, VALID_TO, BATCH_ID, EMIT_SEQ)

    def columns(self) -> Any:
        """The join's column roles (each operator's own columns class)."""
        raise NotImplementedError

    def check_sides(self) -> None:
        who = f"{self.operator} spec {self.name!r}"
        for side, src in (("left", self.left), ("right", self.right)):
            if len(src.key_columns) != 1:
                raise self.error(f"{side}.key_columns", f"the join is on one primary-key column, "
                                 f"got {len(src.key_columns)}")
            src.versioning().check(who, f"{side}.")


@dataclass(frozen=True)
class ChangelogJoinEngine:
    """What runs a join of two changelog tables for the Dagster layer (the table-table join,
    the foreign-key join): the operator's package (`package`) has `backfill.backfill` and
    `backfill.latest_agreement`; its batch log is `app`. A subclass gives `microbatch`."""

    spec: Any
    layout: PipelineLayout
    package: ClassVar[str]
    app: ClassVar[str]

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
            spark, self.spec.engine_spec(), self.layout.join, days=list(days),
            columns=self.spec.columns(), dry_run=dry_run, **self._sources()))

    def stream_time(self) -> int | None:
        return carried_stream_time(self.layout, self.app)

    def step(self) -> Any:
        """The operator's incremental step, as its micro-batches run it."""
        raise NotImplementedError

    def run_step(self, spark: SparkSession) -> Any:
        """The next micro-batch of `step()` on the runtime (its BatchResult)."""
        from joins import incremental

        return incremental.run_microbatch(spark, self.step(), self.layout.join,
                                          {side: self.layout.input_table(side)
                                           for side in ("left", "right")})

    def runtime(self) -> Any:
        """The join as the runtime runs it (`joins.reproduce.Runtime`). Its batch form writes
        the temporal history, a table of its own, so the output's days are rebuilt from the
        micro-batches that wrote them (no form needed)."""
        from joins.incremental import Source
        from joins.reproduce import Runtime

        return Runtime(self.spec.name, self.step(), None, self.layout.join,
                       {side: Source(self.layout.input_table(side)) for side in ("left", "right")})

    def output_identity(self) -> tuple[str, ...]:
        return (self.spec.left.key_column, BATCH_ID)

    def consistency(self, spark: SparkSession) -> CheckSummary:
        return agreement_summary(self._backfill_module().latest_agreement(
            spark, self.spec.engine_spec(), self.layout.join_root, columns=self.spec.columns(),
            **self._sources()))


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
