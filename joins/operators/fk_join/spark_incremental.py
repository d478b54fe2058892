"""The foreign-key join (seed 004, KIP-213) on the incremental runtime.

A batch runs KIP-213's protocol over all the updates both changelog inputs gained since the
last batch (`spark_sides`: which updates each side's store takes; `spark_protocol`:
subscriptions, answers, fan-out, the stale-response guard, compaction; `spark_frames`: the
wiring and the state reads). It writes the join's changelog (the last result per left key of
the batch), the state tables (`lhs`, `rhs`, `subscriptions`) and, when asked, the expired
updates to the quarantine. Spark jobs of a batch: the output and state writes, side by side
(the decided updates and the state rows read are cached, computed once; the protocol's counts
are observed while writing), and a broadcast per state read. Stream times and row counts come
from Delta statistics; the prefix scan that decides expiry runs only when they say an update
may be beyond retention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins import incremental
from joins.changelog import (
    STATE_BATCH,
    SideClock,
    both_sides,
    compact_keyed_state,
    expired_rows,
    require,
    stream_time_key,
)
from joins.changelog.report import consumed_versions
from joins.errors import ConfigError
from joins.incremental import Outcome, StateTable, StepContext, StepResult, Written
from joins.operators.fk_join.columns import (
    APP,
    BATCH_ID,
    EMIT_SEQ,
    EVENT_DATE,
    LHS,
    OPERATOR,
    RHS,
    S_FK,
    S_HASH,
    S_LIVE,
    S_PK,
    S_TS,
    SIDES,
    SUBSCRIPTIONS,
    TOMBSTONE,
    TS,
    FkColumns,
    Side,
    has,
)
from joins.operators.fk_join.report import FkJoinReport
from joins.operators.fk_join.spark_frames import batch_frames
from joins.operators.fk_join.spark_protocol import (
    EMIT,
    FANOUT,
    FK,
    HASH,
    HIDDEN,
    IDX,
    INSTR,
    MSGS,
    MTS,
    PK,
    VALID,
    compacted,
)
from joins.operators.fk_join.spark_sides import (
    APPLIED,
    NEW,
    NEXT,
    OOO,
    ORD,
    ST,
    live,
    state_rows,
)
from joins.spark.exprs import count_if

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from joins.operators.fk_join.spec import FkJoinSpec


@dataclass
class FkJoinStep:
    """The join as an incremental operator (inputs `left` and `right`). `quarantine_expired`:
    also write updates beyond a versioned side's history retention to the quarantine.
    `verify_hash=False` switches the stale-response guard off (tests only)."""

    spec: FkJoinSpec
    cols: FkColumns = field(default_factory=FkColumns)
    quarantine_expired: bool = False
    verify_hash: bool = True
    name: str = APP
    inputs: tuple[str, ...] = SIDES

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (StateTable(LHS, "append"), StateTable(RHS, "append"),
                StateTable(SUBSCRIPTIONS, "append"))

    def retention(self, side: Side) -> int | None:
        s = self.spec.left if side == "left" else self.spec.right
        return s.retention_ms if s.versioned else None

    def after_done(self, ctx: StepContext) -> None:
        from pyspark.sql import functions as F

        for table, key, side in ((LHS, self.cols.key, "left"), (RHS, self.cols.right.key, "right")):
            compact_keyed_state(ctx.spark, ctx.root.state(table), key, app=APP,
                                keep=live(self.retention(side) is not None))  # type: ignore[arg-type]
        compact_keyed_state(ctx.spark, ctx.root.state(SUBSCRIPTIONS), (S_FK, S_PK), app=APP,
                            keep=F.col(S_LIVE))

    def input_types(self, ctx: StepContext) -> tuple[dict[str, DataType], DataType]:
        """Each side's value struct type and the foreign key's type, checked."""
        from joins.operators.fk_join.spark_sides import value_type

        types: dict[str, DataType] = {}
        schemas = {}
        for side in SIDES:
            schema = schemas[side] = ctx.schema(side)
            need = self.cols.left_input_columns() if side == "left" else [
                *self.cols.right.bookkeeping(), *self.cols.right_values]
            require(schema, need, who=OPERATOR, what=f"the {side} input {ctx.source_path(side)!r}")
            types[side] = value_type(schema, side, self.cols)  # type: ignore[arg-type]
        fk_type = schemas["left"][self.cols.foreign_key].dataType
        key_type = schemas["right"][self.cols.right.key].dataType
        if fk_type != key_type:
            raise ConfigError(f"{OPERATOR}: the foreign key {self.cols.foreign_key!r} of the left "
                              f"input is {fk_type.simpleString()} but the right key "
                              f"{self.cols.right.key!r} is {key_type.simpleString()}: they "
                              f"would never be equal")
        return types, fk_type

    def step(self, ctx: StepContext) -> StepResult:
        types, fk_type = self.input_types(ctx)
        with ctx.phase("stream time"):
            clocks, marked = both_sides(ctx, self.cols, self.retention)
        with ctx.phase("frames"):  # driver only: the plans, no Spark job
            frames = batch_frames(ctx, self.spec, self.cols, marked, types, fk_type,
                                  verify_hash=self.verify_hash)
        state: dict[str, Written] = {}
        if frames.left is not None:
            state[LHS] = self._lhs(ctx, frames.left)
        if frames.right is not None:
            state[RHS] = self._rhs(ctx, frames.right)
        if frames.messages is not None:
            state[SUBSCRIPTIONS] = self._subscriptions(ctx, frames.messages)
        output = None if frames.guarded is None else self._output(ctx, frames.guarded)
        return StepResult(output=output, quarantine=self._quarantine(ctx, marked, clocks),
                          state=state, finish=self._finisher(ctx, clocks), release=frames.release)

    def _output(self, ctx: StepContext, guarded: DataFrame) -> Written:
        from pyspark.sql import functions as F

        from joins.spark.exprs import event_date

        cols, bid = self.cols, ctx.batch_id

        def rows(df: DataFrame) -> DataFrame:
            res = compacted(df, self.spec.join)
            left, right, tomb = F.col("left"), F.col("right"), F.col("tomb")
            return res.select(
                F.col(PK).alias(cols.key),
                *(left[v].alias(cols.out("left", v)) for v in cols.left_values),
                *(right[v].alias(cols.out("right", v)) for v in cols.right_values),
                (~tomb).alias(has("left")), right.isNotNull().alias(has("right")),
                F.col("ts").alias(TS), tomb.alias(TOMBSTONE), event_date(F.col("ts")).alias(EVENT_DATE),
                F.lit(bid).cast("long").alias(BATCH_ID),
                F.shiftright(F.col("ord"), 1).alias(EMIT_SEQ))

        return Written(guarded, derive=rows, metrics={
            "answers": count_if(~F.col(FANOUT)), "fan_out": count_if(F.col(FANOUT)),
            "stale": count_if(~F.col(VALID)), "not_propagated": count_if(F.col(HIDDEN)),
            "emitted": count_if(F.col(EMIT))})

    def _lhs(self, ctx: StepContext, decided: DataFrame) -> Written:
        from pyspark.sql import functions as F

        def subscribed(row: str) -> Any:
            return F.when(F.col(row)["present"] & F.col(row)["fk"].isNotNull(), 1).otherwise(0)

        last = F.col(APPLIED) & F.col(NEXT).isNull()
        new = F.col(NEW)
        null_fk = F.lit(self.spec.join == "inner") & F.col(APPLIED) & new["present"] & \
            new["fk"].isNull()
        return Written(decided, derive=lambda df: state_rows(df, "left", self.cols, ctx.batch_id),
                       metrics={"ooo": count_if(F.col(OOO)), "expired": count_if(F.col("_expired")),
                                "sent": F.sum(F.size(MSGS)), "null_fk": count_if(null_fk),
                                "subscribed": F.sum(F.when(last, subscribed(NEW) - subscribed(ST))
                                                    .otherwise(0))})

    def _rhs(self, ctx: StepContext, decided: DataFrame) -> Written:
        from pyspark.sql import functions as F

        return Written(decided, derive=lambda df: state_rows(df, "right", self.cols, ctx.batch_id),
                       metrics={"ooo": count_if(F.col(OOO)), "expired": count_if(F.col("_expired"))})

    def _subscriptions(self, ctx: StepContext, messages: DataFrame) -> Written:
        """The subscription store's rows of the batch: the last message per (fk, pk) (a null
        FK is never stored); a delete keeps the row, not live, until compaction."""
        from pyspark.sql import functions as F

        from joins.operators.fk_join.spark_protocol import DAP, DNP

        def rows(df: DataFrame) -> DataFrame:
            body = F.struct(F.col(HASH).alias("h"), F.col(MTS).alias("t"),
                            (~F.col(INSTR).isin(DNP, DAP)).alias("live"))
            last = (df.where(F.col(FK).isNotNull()).groupBy(FK, PK)
                    .agg(F.max_by(body, F.struct(F.col(ORD), F.col(IDX))).alias("_m")))
            return last.select(F.col(FK).alias(S_FK), F.col(PK).alias(S_PK),
                               F.col("_m.h").alias(S_HASH), F.col("_m.t").alias(S_TS),
                               F.col("_m.live").alias(S_LIVE),
                               F.lit(ctx.batch_id).cast("long").alias(STATE_BATCH))

        return Written(messages, derive=rows)

    def _quarantine(self, ctx: StepContext, marked: dict[str, DataFrame],
                    clocks: dict[Side, SideClock]) -> Written | None:
        if not self.quarantine_expired:
            return None
        parts = []
        for side, df in marked.items():
            retention = self.retention(side)  # type: ignore[arg-type]
            if retention is None or not clocks[side].may_expire:  # type: ignore[index]
                continue
            parts.append(expired_rows(df, side, self.cols.changelog(side),  # type: ignore[arg-type]
                                      self.cols.values(side), retention_ms=retention,  # type: ignore[arg-type]
                                      batch_id=ctx.batch_id))
        if not parts:
            return None
        return Written(parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1]))

    def _finisher(self, ctx: StepContext, clocks: dict[Side, SideClock]) -> Any:
        plan, carry = ctx.plan, ctx.carry

        def finish(outcome: Outcome) -> tuple[dict[str, Any], dict[str, Any]]:
            metric = outcome.metric  # counts: observed while writing, or recomputed
            live_subs = int(carry.get("subscriptions", 0)) + metric(LHS, "subscribed")
            report = FkJoinReport(
                batch_id=plan.batch_id,
                versions=consumed_versions(plan),
                rows_in={s: int(clocks[s].rows or 0) for s in SIDES},
                rows_out=outcome.rows("output"), subscriptions_sent=metric(LHS, "sent"),
                subscriptions=live_subs, answers=metric("output", "answers"),
                fan_out=metric("output", "fan_out"), stale_discarded=metric("output", "stale"),
                not_propagated=metric("output", "not_propagated"),
                out_of_order_ignored={"left": metric(LHS, "ooo"), "right": metric(RHS, "ooo")},
                expired={"left": metric(LHS, "expired"), "right": metric(RHS, "expired")},
                null_foreign_key_skipped=metric(LHS, "null_fk"),
                quarantined=outcome.rows("quarantine"),
                stream_time={s: clocks[s].after for s in SIDES},
                event_days_touched=outcome.partition_values("output", EVENT_DATE))
            next_carry = {**{stream_time_key(s): clocks[s].after for s in SIDES},
                          "subscriptions": live_subs}
            return next_carry, report.to_dict()

        return finish


def run_microbatch(spark: SparkSession, spec: FkJoinSpec, root: str, *, left_source: Any,
                   right_source: Any, columns: FkColumns | None = None,
                   quarantine_expired: bool = False, batch_id: int | None = None,
                   wait_s: float = incremental.DEFAULT_WAIT_S,
                   verify_hash: bool = True) -> FkJoinReport:
    """Run the next micro-batch of the join under `root` (or re-run a crashed one)."""
    step = FkJoinStep(spec, columns or FkColumns(), quarantine_expired, verify_hash)
    result = incremental.run_microbatch(spark, step, root, {"left": left_source, "right": right_source},
                                        batch_id=batch_id, wait_s=wait_s)
    return FkJoinReport.of(result)
