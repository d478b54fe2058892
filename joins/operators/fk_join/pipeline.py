"""The foreign-key join (seed 004, KIP-213) as a pipeline: two changelog tables fed from landing
folders (kind `changelog`, as for the table-table join), the left one holding the right key in
a value column (`foreign_key`), and what runs it for the Dagster layer.

Like the table-table join, the join asset holds the join's changelog (`output`, written by
micro-batches: what was emitted when) and its temporal history (`history`, written by
backfills of event days: every left version joined with the versions of the right key it
named). Checks: the generic ones (the agreement check compares the history of the latest
complete day with a recomputation) and `latest_equals_temporal_history`. A micro-batch reports
KIP-213's traffic: live subscriptions, subscriptions sent, answers, fan-out, stale responses
discarded, results out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import StrictStr, model_validator

from joins.changelog.join_engine import LATEST_CHECK, ChangelogJoinEngine, TwoTablePipeline
from joins.operators.fk_join.spec import FkJoinSpec
from joins.pipeline.spec import PipelineLayout
from joins.pipeline.summary import RunSummary

# The output's columns besides the left key and the sides' values.
OUTPUT_BOOKKEEPING = ("has_left", "has_right", "ts", "tombstone", "event_date", "_batch_id",
                      "_emit_seq")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.operators.fk_join.columns import FkColumns


class FkJoinPipeline(TwoTablePipeline):
    """`operator: fk_join` (seed 004, KIP-213).

    - `left`, `right`: the two sources (one key column each), each with `versioned` /
      `history_retention_ms`;
    - `foreign_key`: the left value column that holds the right key (same type as the right
      key; null = a null foreign key: no result for `inner`, the left row alone for `left`);
    - `join`: `inner` | `left` (a foreign-key join has no outer form);
    - `quarantine_expired`: updates beyond a versioned side's retention also go to the join's
      quarantine (always counted).
    """

    operator: Literal["fk_join"]
    foreign_key: StrictStr
    join: Literal["inner", "left"] = "inner"

    @model_validator(mode="after")
    def _consistent(self) -> FkJoinPipeline:
        self.check_sides()
        types = {c.name: c.type for c in self.left.value_columns}
        if self.foreign_key not in types:
            raise self.error("foreign_key", f"{self.foreign_key!r} is not a value column of "
                             f"{self.left.name!r} (has {', '.join(types) or 'none'})")
        right_key = self.right.key_columns[0]
        if types[self.foreign_key] != right_key.type:
            raise self.error("foreign_key", f"{self.foreign_key!r} is {types[self.foreign_key]} but "
                             f"the right key {right_key.name!r} is {right_key.type}: they would "
                             f"never be equal")
        others = {*(f"left_{v}" for v in self.left.value_names),
                  *(f"right_{v}" for v in self.right.value_names), *OUTPUT_BOOKKEEPING}
        if self.left.key_column in others:
            raise self.error("left.key_columns", f"the left key {self.left.key_column!r} would "
                             f"repeat another output column")
        self.engine_spec()
        return self

    def engine_spec(self) -> FkJoinSpec:
        return FkJoinSpec.model_validate({
            "join": self.join, "foreign_key": self.foreign_key,
            "left": self.left.versioning().model_dump(exclude_none=True),
            "right": self.right.versioning().model_dump(exclude_none=True)})

    def columns(self) -> FkColumns:
        from joins.changelog import ChangelogColumns
        from joins.operators.fk_join.columns import FkColumns

        return FkColumns(left=ChangelogColumns(key=self.left.key_column),
                         right=ChangelogColumns(key=self.right.key_column),
                         left_values=self.left.value_names, right_values=self.right.value_names,
                         foreign_key=self.foreign_key)

    @property
    def late_horizon_ms(self) -> int:
        return max((s.history_retention_ms or 0) for s in (self.left, self.right))

    def summary(self) -> str:
        return (f"`{self.left.name}` {self.join}-joined with `{self.right.name}` by the foreign key "
                f"`{self.foreign_key}` (KIP-213): the join's changelog (micro-batches) and its "
                f"temporal history (backfills).")

    def settings(self) -> dict[str, Any]:
        return {"operator": self.operator, "join": self.join, "foreign_key": self.foreign_key,
                "left_versioned": self.left.versioned, "right_versioned": self.right.versioned,
                "left_history_retention_ms": self.left.history_retention_ms or -1,
                "right_history_retention_ms": self.right.history_retention_ms or -1}

    def consistency_check(self) -> tuple[str, str] | None:
        return (LATEST_CHECK, "The join's current result per left key (its left and right state "
                              "joined by foreign key) equals its temporal history at the join's "
                              "stream time (every key compared in Spark).")

    def engine(self, layout: PipelineLayout) -> FkJoinEngine:
        return FkJoinEngine(self, layout)


@dataclass(frozen=True)
class FkJoinEngine(ChangelogJoinEngine):
    spec: FkJoinPipeline
    package: ClassVar[str] = "joins.operators.fk_join"
    app: ClassVar[str] = "fk_join"

    def step(self) -> Any:
        from joins.operators.fk_join.spark_incremental import FkJoinStep

        return FkJoinStep(self.spec.engine_spec(), self.spec.columns(), self.spec.quarantine_expired)

    def microbatch(self, spark: SparkSession) -> RunSummary:
        from joins.operators.fk_join.report import FkJoinReport

        r = FkJoinReport.of(self.run_step(spark))
        return self.run_summary(r, {
            "subscriptions": r.subscriptions, "subscriptions_sent": r.subscriptions_sent,
            "answers": r.answers, "fan_out": r.fan_out, "stale_discarded": r.stale_discarded,
            "not_propagated": r.not_propagated,
            "null_foreign_key_skipped": r.null_foreign_key_skipped})
