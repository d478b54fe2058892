"""The primary-key table-table join as a pipeline: two changelog tables fed from landing
folders (kind `changelog`: every update in arrival order with its tombstone flag), each side
versioned or not, and what runs it for the Dagster layer.

The join asset holds two tables: the join's changelog (`output`, written by micro-batches:
what was emitted when) and its temporal history (`history`, written by backfills of event
days: what held when). Checks: the generic ones (the backfill agreement check compares the
history of the latest complete day with a recomputation) and `latest_equals_temporal_history`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import model_validator

from joins.changelog.join_engine import LATEST_CHECK, ChangelogJoinEngine, TwoTablePipeline
from joins.operators.table_table_join.spec import TableTableJoinSpec
from joins.pipeline.spec import PipelineLayout
from joins.pipeline.summary import RunSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.operators.table_table_join.columns import TableTableColumns



class TableTableJoinPipeline(TwoTablePipeline):
    """`operator: table_table_join` (seed 000, KIP-914).

    - `left`, `right`: the two sources (one key column each, of the same type), each with
      `versioned` / `history_retention_ms`;
    - `join`: `inner` | `left` | `outer`;
    - `quarantine_expired`: updates beyond a versioned side's retention also go to the join's
      quarantine (always counted).
    """

    operator: Literal["table_table_join"]
    join: Literal["inner", "left", "outer"] = "inner"

    @model_validator(mode="after")
    def _consistent(self) -> TableTableJoinPipeline:
        self.check_sides()
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
class TableTableJoinEngine(ChangelogJoinEngine):
    spec: TableTableJoinPipeline
    package: ClassVar[str] = "joins.operators.table_table_join"
    app: ClassVar[str] = "table_table_join"

    def step(self) -> Any:
        from joins.operators.table_table_join.spark_incremental import TableTableJoinStep

        return TableTableJoinStep(self.spec.engine_spec(), self.spec.columns(),
                                  self.spec.quarantine_expired)

    def microbatch(self, spark: SparkSession) -> RunSummary:
        from joins.operators.table_table_join.report import TableTableReport

        r = TableTableReport.of(self.run_step(spark))
        return self.run_summary(r, {"tombstones_out": r.tombstones_out,
                                    "keys_changed": r.keys_changed})
