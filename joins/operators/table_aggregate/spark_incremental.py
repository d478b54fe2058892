"""KGroupedTable aggregation on the incremental runtime (seed 002): count, sum or concat of a
table's current values grouped by a field, exactly as the reference processor with the
micro-batch rule (the output compacted to the last value per group per batch).

Per batch: the input keys' updates are folded over their memberships (`spark_fold.py`), the
touched groups get their values after the batch (`spark_groups.py`), and three tables are
written: the output (one row per touched group: the group key as text, the aggregate, ts,
lineage; a group without members holds 0, or "" for concat, as in Kafka, so `tombstone` is
always false), the `members` state (the new membership of every input key the batch changed;
its commit carries the batch's counters, observed while it is written) and the `groups` state
(each touched group's output ts and, for count, its running count).

Output columns: `key` (the group key: canonical JSON for JSON values, the text of a typed
column), `count` | `sum` and `sum_int` (the exact total while every member is an integer) |
`concat`, `tombstone`, `ts`, `event_date`, `_batch_id`, `_emit_seq`, `_emit_role` (0: the
group a key left, 1: the one it joined).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins.changelog import (
    ChangelogColumns,
    compact_keyed_state,
    keyed_state,
    mark_expired,
    require,
    side_clock,
)
from joins.changelog.values import JsonValues, TypedValues, key_order
from joins.incremental import Outcome, StateTable, StepContext, StepResult, Written
from joins.operators.table_aggregate.spark_fold import ACC, COUNTS, KEY, fold, updates_of
from joins.operators.table_aggregate.spark_groups import GROUP, count_deltas, member_values, touched
from joins.spark.frames import SharedFrames, worth_checkpointing

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.table_aggregate.spec import TableAggregateSpec

APP = "table_aggregate"
MEMBERS, GROUPS = "members", "groups"
STREAM_TIME = "stream_time"


@dataclass
class TableAggregateStep:
    """`json_keys`: the input keys are key texts (a replay), ordered by the reference's
    key_order; otherwise typed keys ordered by value."""

    spec: TableAggregateSpec
    values: JsonValues | TypedValues = field(default_factory=JsonValues)
    cols: ChangelogColumns = field(default_factory=ChangelogColumns)
    json_keys: bool = True
    name: str = APP
    inputs: tuple[str, ...] = ("table",)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (StateTable(MEMBERS, "append"), StateTable(GROUPS, "append"))

    def after_done(self, ctx: StepContext) -> None:
        from pyspark.sql import functions as F

        # A key in no group is worth a row only for a versioned input's latest ts; groups keep
        # their ts after they empty (a group's time never goes back).
        keep = F.col(GROUP).isNotNull() | F.lit(self.spec.versioned)
        compact_keyed_state(ctx.spark, ctx.root.state(MEMBERS), self.cols.key, app=APP, keep=keep)
        compact_keyed_state(ctx.spark, ctx.root.state(GROUPS), GROUP, app=APP)

    def step(self, ctx: StepContext) -> StepResult:
        from pyspark.sql import functions as F

        cols, spec, key = self.cols, self.spec, self.cols.key
        schema = ctx.schema("table")
        require(schema, [*cols.bookkeeping()], who=APP,
                what=f"the input {ctx.source_path('table')!r}")
        retention = spec.retention_ms if spec.versioned else None
        clock = side_clock(ctx, "table", cols, before=ctx.carry.get(STREAM_TIME), retention_ms=retention)
        updates = updates_of(mark_expired(ctx.changes("table"), cols, clock, retention), spec,
                             self.values, cols)
        members_log = ctx.state(MEMBERS)
        state = keyed_state(members_log, updates, key, keys_key=KEY)
        # The folded updates and the groups' results are each read by several frames and writes.
        shared = SharedFrames(worth_checkpointing(ctx.new_rows("table")))
        folded = shared.keep(fold(updates, state, spec, key))
        groups = touched(folded)
        previous = keyed_state(ctx.state(GROUPS), groups, GROUP)
        if spec.aggregate.function == "count":
            values = groups.join(count_deltas(folded), GROUP, "left")
            if previous is not None:
                values = values.join(previous.select(GROUP, F.col("count").alias("_before")), GROUP, "left")
            before = F.col("_before") if previous is not None else F.lit(0)
            n = F.coalesce(before, F.lit(0)) + F.coalesce(F.col("delta"), F.lit(0))
            result = values.select(GROUP, "touch_ts", "last", n.cast("bigint").alias("n"),
                                   n.cast("bigint").alias("value"))
        else:
            order = lambda c: key_order(c, json_keys=self.json_keys)  # noqa: E731
            result = groups.join(member_values(members_log, folded, groups, spec, key, order), GROUP, "left")
        if previous is not None:
            result = result.join(previous.select(GROUP, F.col("ts").alias("_ts_before")), GROUP, "left")
        ts = F.greatest(F.col("_ts_before"), F.col("touch_ts")) if previous is not None else F.col("touch_ts")
        result = shared.keep(result.withColumn("ts", ts))
        return StepResult(output=self._output(ctx, result),
                          state={MEMBERS: self._members(ctx, folded), GROUPS: self._groups(ctx, result)},
                          finish=self._finisher(ctx, clock), release=shared.release)

    def _value_columns(self) -> list[Column]:
        from pyspark.sql import functions as F

        # A group without members holds the aggregate after the subtraction (Kafka's
        # KTableAggregate forwards whatever the subtractor returns): 0, or "" for concat.
        empty = F.coalesce(F.col("n"), F.lit(0)) == 0
        function = self.spec.aggregate.function
        if function == "count":
            return [F.coalesce(F.col("value"), F.lit(0)).cast("bigint").alias("count")]
        if function == "sum":
            total = F.col("value")
            return [F.when(empty, F.lit(0.0)).when(total["is_float"], total["d"])
                    .otherwise(total["i"].cast("double")).alias("sum"),
                    F.when(empty, F.lit(0).cast("bigint")).when(~total["is_float"], total["i"])
                    .alias("sum_int")]
        return [F.when(empty, F.lit("")).otherwise(F.col("value")).alias("concat")]

    def _output(self, ctx: StepContext, result: DataFrame) -> Written:
        from pyspark.sql import functions as F

        from joins.spark.exprs import event_date

        def rows(df: DataFrame) -> DataFrame:
            return df.select(
                F.col(GROUP).alias("key"), *self._value_columns(),
                # Never true since the empty group keeps its 0 (the column keeps the table
                # result's changelog shape, which a reader of any table operator expects).
                F.lit(False).alias("tombstone"), F.col("ts"),
                event_date(F.col("ts")).alias("event_date"),
                F.lit(ctx.batch_id).cast("long").alias("_batch_id"),
                F.col("last.seq").alias("_emit_seq"), F.col("last.role").alias("_emit_role"))

        return Written(result, derive=rows)

    def _members(self, ctx: StepContext, folded: DataFrame) -> Written:
        from pyspark.sql import functions as F

        from joins.spark.exprs import count_if

        acc = F.col(ACC)

        def rows(df: DataFrame) -> DataFrame:
            return df.where(acc["applied"] > 0).select(
                F.col(KEY).alias(self.cols.key), acc["mg"].alias(GROUP), acc["mc"].alias("part"),
                acc["clatest"].alias("latest_ts"), F.lit(ctx.batch_id).cast("long").alias("_batch_id"))

        metrics = {c: F.sum(acc[c]) for c in COUNTS}
        metrics["keys_changed"] = count_if(acc["applied"] > 0)
        return Written(folded, derive=rows, metrics=metrics)

    def _groups(self, ctx: StepContext, result: DataFrame) -> Written:
        from pyspark.sql import functions as F

        count = F.col("n") if self.spec.aggregate.function == "count" else F.lit(None)
        return Written(result, derive=lambda df: df.select(
            GROUP, F.col("ts"), count.cast("bigint").alias("count"),
            F.lit(ctx.batch_id).cast("long").alias("_batch_id")))

    def _finisher(self, ctx: StepContext, clock: Any) -> Any:
        def finish(outcome: Outcome) -> tuple[dict[str, Any], dict[str, Any]]:
            report = {"batch_id": ctx.batch_id, "rows_in": int(clock.rows or 0),
                      "rows_out": outcome.rows("output"), "stream_time": clock.after,
                      "groups_changed": outcome.rows(GROUPS),
                      "keys_changed": int(outcome.metric(MEMBERS, "keys_changed")),
                      **{c: int(outcome.metric(MEMBERS, c)) for c in COUNTS},
                      "event_days_touched": list(outcome.partition_values("output", "event_date"))}
            return {STREAM_TIME: clock.after}, report

        return finish
