"""KTable's stateless per-record operators on the incremental runtime: the fold that
`KTable#filter` (`table_filter`) and `KTable#mapValues` (`table_map`) share (seed 002).

Kafka Streams runs both the same way: the table source keeps the input in a store, puts each
update and forwards the change `(new value, old value, is_latest)`; the operator maps both sides
of the change (the filter to the value or null, mapValues through its function) and forwards it.
A batch here folds each key's updates (arrival order) over the key's current state (`current`:
the store's current value, whether it passed, a versioned input's latest ts), exactly as the
reference processors do with the micro-batch rule: an expired update (beyond a versioned input's
history retention; `joins.changelog.mark_expired`) does nothing; every other update is put (an
out-of-order one of a versioned input only as history) and forwarded, except where
`drop_null_to_null` (the filter on an unversioned input) drops an update whose old and new
results are both null. Per key the batch keeps the last forwarded item that is latest (an
out-of-order one only when there is none), with the `old_value` of the key's first forwarded
item: `joins.microbatch.compact_table_items`.

An operator subclasses `ForwardStep`, gives `spec` (versioned, retention), `values` (its value
model: the columns carried into state and output) and `cols`, and may override `new_verdict`
(the filter's predicate), and `changes`, `carried`, `input_columns` and `value_type` together
(mapValues' projection of the input into other columns).

Output: the key, the new value's columns, `old_<column>`s, `has_value` / `has_old_value`, `ts`,
`is_latest`, `event_date`, `_batch_id`, `_emit_seq` (arrival index of the forwarded update).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from joins.changelog.columns import ChangelogColumns, require
from joins.changelog.expiry import EXPIRED, mark_expired, side_clock
from joins.changelog.keyed import compact_keyed_state, keyed_state
from joins.changelog.values import JsonValues, TypedValues, value_struct
from joins.incremental import Outcome, StateTable, StepContext, StepResult, Written

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from joins.core.versioned import VersionedInput

CURRENT = "current"
STREAM_TIME = "stream_time"
PASS, FAIL, MISSING_FIELD, INCOMPARABLE = "pass", "fail", "missing_field", "incomparable"
KEY, UPDATE, UPDATES, ACC = "_key", "_u", "_us", "_acc"
ALL_COUNTS = ("expired", "null_to_null_dropped", "out_of_order_forwarded", "missing_field",
              "incomparable")


def counted(acc: Column, name: str, cond: Column) -> Column:
    """The fold's counter `name` plus one where `cond` holds."""
    from pyspark.sql import functions as F

    return (acc[name] + F.when(cond, F.lit(1)).otherwise(F.lit(0))).alias(name)


def out_of_order(acc: Column, x: Column, versioned: Column) -> Column:
    """A versioned input's update older than the key's latest ts (`clatest`), not expired: the
    store keeps it as history only (seed 002)."""
    return ~x["expired"] & versioned & acc["clatest"].isNotNull() & (x["ts"] < acc["clatest"])


class ForwardStep:
    """The shared fold; subclasses are dataclasses with `spec`, `values`, `cols`, `name`."""

    spec: VersionedInput
    values: JsonValues | TypedValues
    cols: ChangelogColumns
    name: str
    inputs: tuple[str, ...] = ("table",)
    # The counters the operator reports (the reference's METRIC_NAMES).
    counts: ClassVar[tuple[str, ...]] = ALL_COUNTS
    # KTable#filter drops a null-to-null change of an unversioned input; mapValues never does.
    drops_null_to_null: ClassVar[bool] = False

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (StateTable(CURRENT, "append"),)

    # ---- what an operator configures -------------------------------------------------------

    def new_verdict(self) -> Column:
        """pass | fail | missing_field | incomparable of a non-tombstone update's value."""
        from pyspark.sql import functions as F

        return F.lit(PASS)

    def changes(self, ctx: StepContext) -> DataFrame:
        """The batch's input changes with the carried value columns."""
        return ctx.changes("table")

    def carried(self) -> tuple[str, ...]:
        """The value columns state and output carry."""
        return self.values.value_columns

    def input_columns(self) -> tuple[str, ...]:
        """The value columns the input must hold."""
        return self.carried()

    def value_type(self, schema: StructType) -> StructType:
        """The struct of the carried value columns, from the input's schema."""
        return value_struct(schema, self.carried())

    # ---- the runtime's protocol ------------------------------------------------------------

    def after_done(self, ctx: StepContext) -> None:
        from pyspark.sql import functions as F

        # An unversioned input forgets a deleted key; a versioned one keeps its latest ts.
        keep = F.col("present") | F.lit(self.spec.versioned)
        compact_keyed_state(ctx.spark, ctx.root.state(CURRENT), self.cols.key, app=self.name, keep=keep)

    def step(self, ctx: StepContext) -> StepResult:
        from pyspark.sql import functions as F

        cols, spec = self.cols, self.spec
        schema = ctx.schema("table")
        require(schema, [*cols.bookkeeping(), *self.input_columns()],
                who=self.name, what=f"the input {ctx.source_path('table')!r}")
        vtype = self.value_type(schema)
        retention = spec.retention_ms if spec.versioned else None
        clock = side_clock(ctx, "table", cols, before=ctx.carry.get(STREAM_TIME), retention_ms=retention)
        marked = mark_expired(self.changes(ctx), cols, clock, retention)
        tomb = F.col(cols.tombstone)
        update = F.struct(
            F.col(cols.seq).cast("long").alias("seq"), F.col(EXPIRED).alias("expired"),
            F.col(cols.ts).cast("long").alias("ts"), tomb.alias("tomb"),
            F.struct(*(F.col(c) for c in self.carried())).alias("v"),
            F.when(~tomb, self.new_verdict()).alias("verdict"))
        updates = marked.select(F.col(cols.key).alias(KEY), update.alias(UPDATE))
        state = keyed_state(ctx.state(CURRENT), updates, cols.key, keys_key=KEY)
        grouped = updates.groupBy(KEY).agg(F.array_sort(F.collect_list(UPDATE)).alias(UPDATES))
        if state is not None:
            grouped = grouped.join(state.withColumnRenamed(cols.key, KEY), KEY, "left")
        folded = grouped.select(KEY, F.aggregate(UPDATES, self._initial(state is not None, vtype),
                                                 self._merge(vtype)).alias(ACC)).persist()
        return StepResult(output=self._output(ctx, folded), state={CURRENT: self._state(ctx, folded)},
                          finish=self._finisher(ctx, clock), release=folded.unpersist)

    # ---- the fold ------------------------------------------------------------------------------

    def _initial(self, has_state: bool, vtype: Any) -> Column:
        from pyspark.sql import functions as F

        def state(name: str, default: Column) -> Column:
            return F.coalesce(F.col(name), default) if has_state else default

        # Nullable from the start (`when` without `otherwise`): the fold's accumulator keeps the
        # initial value's nullability, and generated code writes a tombstone's null into it.
        value = (F.when(F.col("present"), F.struct(*(F.col(c) for c in self.carried()))).cast(vtype)
                 if has_state else F.lit(None).cast(vtype))
        no_value, no_long, zero = F.lit(None).cast(vtype), F.lit(None).cast("long"), F.lit(0)
        return F.struct(
            state("present", F.lit(False)).alias("cp"), value.alias("cv"),
            state("passes", F.lit(False)).alias("cpass"),
            (F.col("latest_ts").cast("long") if has_state else no_long).alias("clatest"),
            zero.alias("applied"), *(zero.alias(c) for c in ALL_COUNTS),
            F.lit(False).alias("fo_set"), F.lit(False).alias("fo_p"), no_value.alias("fo_v"),
            F.lit(False).alias("k_set"), F.lit(False).alias("k_has_latest"),
            F.lit(False).alias("k_p"), no_value.alias("k_v"), no_long.alias("k_ts"),
            F.lit(False).alias("k_latest"), no_long.alias("k_seq"))

    def _merge(self, vtype: Any) -> Any:
        from pyspark.sql import functions as F

        versioned = F.lit(self.spec.versioned)
        keeps_nulls = F.lit(self.spec.versioned or not self.drops_null_to_null)

        def merge(acc: Column, x: Column) -> Column:
            def count(name: str, cond: Column) -> Column:
                return counted(acc, name, cond)

            expired, tomb, ts = x["expired"], x["tomb"], x["ts"]
            ooo = out_of_order(acc, x, versioned)
            latest = ~expired & ~ooo
            new_p = ~tomb & (x["verdict"] == F.lit(PASS))
            old_p = acc["cp"] & acc["cpass"]
            forwarded = ~expired & (keeps_nulls | new_p | old_p)
            first = forwarded & ~acc["fo_set"]
            take = forwarded & (latest | ~acc["k_has_latest"])

            def keep(name: str, value: Column) -> Column:
                return F.when(take, value).otherwise(acc[name]).alias(name)

            return F.struct(
                F.when(latest, ~tomb).otherwise(acc["cp"]).alias("cp"),
                F.when(latest & ~tomb, x["v"]).when(latest, F.lit(None).cast(vtype))
                .otherwise(acc["cv"]).alias("cv"),
                F.when(latest, F.coalesce(x["verdict"] == F.lit(PASS), F.lit(False)))
                .otherwise(acc["cpass"]).alias("cpass"),
                F.when(latest, F.greatest(acc["clatest"], ts)).otherwise(acc["clatest"]).alias("clatest"),
                count("applied", latest), count("expired", expired),
                count("null_to_null_dropped", ~expired & ~keeps_nulls & ~new_p & ~old_p),
                count("out_of_order_forwarded", forwarded & ooo),
                count("missing_field", ~expired & (x["verdict"] == F.lit(MISSING_FIELD))),
                count("incomparable", ~expired & (x["verdict"] == F.lit(INCOMPARABLE))),
                (acc["fo_set"] | forwarded).alias("fo_set"),
                F.when(first, old_p).otherwise(acc["fo_p"]).alias("fo_p"),
                F.when(first & old_p, acc["cv"]).when(first, F.lit(None).cast(vtype))
                .otherwise(acc["fo_v"]).alias("fo_v"),
                (acc["k_set"] | forwarded).alias("k_set"),
                (acc["k_has_latest"] | (forwarded & latest)).alias("k_has_latest"),
                keep("k_p", new_p), keep("k_v", F.when(new_p, x["v"])), keep("k_ts", ts),
                keep("k_latest", latest), keep("k_seq", x["seq"]))

        return merge

    def _output(self, ctx: StepContext, folded: DataFrame) -> Written:
        from pyspark.sql import functions as F

        from joins.spark.exprs import count_if, event_date

        acc, key = F.col(ACC), self.cols.key

        def rows(df: DataFrame) -> DataFrame:
            value_cols = self.carried()
            return df.where(acc["k_set"]).select(
                F.col(KEY).alias(key),
                *(F.when(acc["k_p"], acc["k_v"][c]).alias(c) for c in value_cols),
                *(F.when(acc["fo_p"], acc["fo_v"][c]).alias(f"old_{c}") for c in value_cols),
                acc["k_p"].alias("has_value"), acc["fo_p"].alias("has_old_value"),
                acc["k_ts"].alias("ts"), acc["k_latest"].alias("is_latest"),
                event_date(acc["k_ts"]).alias("event_date"),
                F.lit(ctx.batch_id).cast("long").alias("_batch_id"), acc["k_seq"].alias("_emit_seq"))

        metrics = {c: F.sum(acc[c]) for c in self.counts}
        metrics["keys_changed"] = count_if(acc["applied"] > 0)
        return Written(folded, derive=rows, metrics=metrics)

    def _state(self, ctx: StepContext, folded: DataFrame) -> Written:
        from pyspark.sql import functions as F

        acc = F.col(ACC)

        def rows(df: DataFrame) -> DataFrame:
            return df.where(acc["applied"] > 0).select(
                F.col(KEY).alias(self.cols.key),
                *(acc["cv"][c].alias(c) for c in self.carried()),
                acc["cp"].alias("present"), acc["cpass"].alias("passes"),
                acc["clatest"].alias("latest_ts"), F.lit(ctx.batch_id).cast("long").alias("_batch_id"))

        return Written(folded, derive=rows)

    def _finisher(self, ctx: StepContext, clock: Any) -> Any:
        def finish(outcome: Outcome) -> tuple[dict[str, Any], dict[str, Any]]:
            report = {"batch_id": ctx.batch_id, "rows_in": int(clock.rows or 0),
                      "rows_out": outcome.rows("output"), "stream_time": clock.after,
                      "keys_changed": int(outcome.metric("output", "keys_changed")),
                      **{c: int(outcome.metric("output", c)) for c in self.counts},
                      "event_days_touched": list(outcome.partition_values("output", "event_date"))}
            return {STREAM_TIME: clock.after}, report

        return finish
