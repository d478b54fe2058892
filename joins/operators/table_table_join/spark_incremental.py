"""The primary-key table-table join on the incremental runtime (seed 000, KIP-914).

A batch takes the rows both changelog inputs gained since the last batch and folds them per
key over the key's current state (`fold.py`: the reference processor, per key, as column
expressions). It writes the join's changelog (the last result per key of the batch), the keys'
new state (`current`), and, when asked, the expired updates to the quarantine.

What it costs in Spark jobs for a batch whose updates are all within retention: the broadcast
of the batch's keys into the state scan, the output write (the fold runs here, once: it is
cached for the next write; its counts are observed while writing) and the state write. Stream
times and row counts come from Delta statistics; the prefix scan that decides expiry runs only
when statistics say an update may be beyond retention. The state read touches the batch's keys
only (`joins.changelog.keyed_state`), so a batch costs the same against 100k or 10M keys, up
to the scan of the state's key column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins import incremental
from joins.changelog import (
    EXPIRED,
    SideClock,
    both_sides,
    compact_keyed_state,
    expired_reason,
    keyed_state,
    require,
    stream_time_key,
)
from joins.changelog.report import consumed_versions
from joins.changelog.values import value_struct
from joins.incremental import Outcome, StateTable, StepContext, StepResult, Written
from joins.incremental.backfill import count_if
from joins.operators.table_table_join.columns import (
    APP,
    BATCH_ID,
    CURRENT,
    EMIT_SEQ,
    EVENT_DATE,
    OPERATOR,
    SIDES,
    TOMBSTONE,
    TS,
    Side,
    TableTableColumns,
    has,
    latest_ts,
    present,
    side_ts,
)
from joins.operators.table_table_join.fold import ACC, KEY, fold, side_updates
from joins.operators.table_table_join.report import TableTableReport

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.operators.table_table_join.spec import TableTableJoinSpec


@dataclass
class TableTableJoinStep:
    """The join as an incremental operator (inputs `left` and `right`). `quarantine_expired`:
    also write updates beyond a versioned side's history retention to the quarantine."""

    spec: TableTableJoinSpec
    cols: TableTableColumns = field(default_factory=TableTableColumns)
    quarantine_expired: bool = False
    name: str = APP
    inputs: tuple[str, ...] = SIDES

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (StateTable(CURRENT, "append"),)

    def retention(self, side: Side) -> int | None:
        s = self.spec.side(side)
        return s.retention_ms if s.versioned else None

    def after_done(self, ctx: StepContext) -> None:
        from pyspark.sql import functions as F

        # A key both of whose sides are absent is worth keeping only for a versioned side's
        # latest ts (an out-of-order update must still be recognised after a delete).
        live = F.lit(False)
        for side in SIDES:
            live = live | F.col(present(side))
            if self.spec.side(side).versioned:
                live = live | F.col(latest_ts(side)).isNotNull()
        compact_keyed_state(ctx.spark, ctx.root.state(CURRENT), self.cols.key, app=APP, keep=live)

    def value_types(self, ctx: StepContext) -> dict[Side, Any]:
        types = {}
        for side in SIDES:
            schema = ctx.schema(side)
            c = self.cols.changelog(side)
            require(schema, [*c.bookkeeping(), *self.cols.values(side)], who=OPERATOR,
                    what=f"the {side} input {ctx.source_path(side)!r}")
            types[side] = value_struct(schema, self.cols.values(side))
        return types

    def step(self, ctx: StepContext) -> StepResult:
        types = self.value_types(ctx)
        with ctx.phase("stream time"):
            clocks, marked = both_sides(ctx, self.cols, self.retention)
        updates = None
        for side, df in marked.items():
            part = side_updates(df, side, self.cols, types)
            updates = part if updates is None else updates.unionByName(part)
        assert updates is not None  # the runtime never runs a batch without new rows
        state = keyed_state(ctx.state(CURRENT), updates, self.cols.key, keys_key=KEY)
        # Read by the output and the state write: computed once, in the first of them.
        folded = fold(updates, state, self.spec, self.cols, types).persist()
        quarantine = self._quarantine(ctx, marked, clocks)
        return StepResult(output=self._output(ctx, folded), quarantine=quarantine,
                          state={CURRENT: self._state(ctx, folded)},
                          finish=self._finisher(ctx, clocks), release=folded.unpersist)

    def _output(self, ctx: StepContext, folded: DataFrame) -> Written:
        from pyspark.sql import functions as F

        from joins.spark.exprs import event_date

        cols, bid = self.cols, ctx.batch_id
        acc = F.col(ACC)
        exists = acc["o_exists"]
        sides = {"left": (acc["o_lp"], acc["o_lv"]), "right": (acc["o_rp"], acc["o_rv"])}

        def rows(df: DataFrame) -> DataFrame:
            out: list[Column] = [F.col(KEY).alias(cols.key)]
            for side in SIDES:
                holds, value = sides[side]
                out += [F.when(exists & holds, value[v]).alias(cols.out(side, v))
                        for v in cols.values(side)]
            out += [(exists & sides[s][0]).alias(has(s)) for s in SIDES]
            out += [acc["o_ts"].alias(TS), (~exists).alias(TOMBSTONE),
                    event_date(acc["o_ts"]).alias(EVENT_DATE),
                    F.lit(bid).cast("long").alias(BATCH_ID), acc["o_seq"].alias(EMIT_SEQ)]
            return df.where(acc["emitted"]).select(*out)

        return Written(folded, derive=rows, metrics={
            "keys": F.count(F.lit(1)), "keys_changed": count_if(acc["applied"] > 0),
            "tombstones": count_if(acc["emitted"] & ~exists),
            "ooo_left": F.sum(acc["ooo_l"]), "ooo_right": F.sum(acc["ooo_r"]),
            "expired_left": F.sum(acc["exp_l"]), "expired_right": F.sum(acc["exp_r"])})

    def _state(self, ctx: StepContext, folded: DataFrame) -> Written:
        from pyspark.sql import functions as F

        cols, acc = self.cols, F.col(ACC)

        def rows(df: DataFrame) -> DataFrame:
            out: list[Column] = [F.col(KEY).alias(cols.key)]
            for side, s in (("left", "l"), ("right", "r")):
                out += [acc[f"{s}v"][v].alias(cols.out(side, v)) for v in cols.values(side)]
                out += [acc[f"{s}p"].alias(present(side)), acc[f"{s}ts"].alias(side_ts(side)),
                        acc[f"{s}latest"].alias(latest_ts(side))]
            out.append(F.lit(ctx.batch_id).cast("long").alias(BATCH_ID))
            return df.where(acc["applied"] > 0).select(*out)

        return Written(folded, derive=rows)

    def _quarantine(self, ctx: StepContext, marked: dict[Side, DataFrame],
                    clocks: dict[Side, SideClock]) -> Written | None:
        from pyspark.sql import functions as F

        if not self.quarantine_expired:
            return None
        parts = []
        for side, df in marked.items():
            retention = self.retention(side)
            if retention is None or not clocks[side].may_expire:
                continue
            c = self.cols.changelog(side)
            record = F.to_json(F.struct(*(F.col(v) for v in self.cols.values(side))))
            parts.append(df.where(F.col(EXPIRED)).select(
                F.lit(side).alias("side"), F.col(c.key).cast("string").alias("key"),
                F.col(c.ts).cast("long").alias(TS), F.col(c.seq).cast("long").alias("_seq"),
                F.lit("expired").alias("kind"), expired_reason(c.ts, retention).alias("reason"),
                F.col("_st_before").alias("stream_time"),
                F.lit(retention).cast("long").alias("history_retention_ms"),
                record.alias("record"), F.lit(ctx.batch_id).cast("long").alias(BATCH_ID)))
        if not parts:
            return None
        rows = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        return Written(rows)

    def _finisher(self, ctx: StepContext, clocks: dict[Side, SideClock]) -> Any:
        plan = ctx.plan

        def finish(outcome: Outcome) -> tuple[dict[str, Any], dict[str, Any]]:
            def metric(name: str) -> int:
                return int(outcome.metric("output", name))

            report = TableTableReport(
                batch_id=plan.batch_id,
                versions=consumed_versions(plan),
                rows_in={s: int(clocks[s].rows or 0) for s in SIDES},
                rows_out=outcome.rows("output"), tombstones_out=metric("tombstones"),
                keys_changed=metric("keys_changed"),
                out_of_order_ignored={s: metric(f"ooo_{s}") for s in SIDES},
                expired={s: metric(f"expired_{s}") for s in SIDES},
                quarantined=outcome.rows("quarantine"),
                stream_time={s: clocks[s].after for s in SIDES},
                event_days_touched=outcome.partition_values("output", EVENT_DATE))
            carry = {stream_time_key(s): clocks[s].after for s in SIDES}
            return carry, report.to_dict()

        return finish


def run_microbatch(spark: SparkSession, spec: TableTableJoinSpec, root: str, *,
                   left_source: str | incremental.Source, right_source: str | incremental.Source,
                   columns: TableTableColumns | None = None,
                   quarantine_expired: bool = False, batch_id: int | None = None,
                   wait_s: float = incremental.DEFAULT_WAIT_S) -> TableTableReport:
    """Run the next micro-batch of the join under `root` (or re-run a crashed one). A source is a
    changelog table's path, or a `joins.incremental.Source` (e.g. `DeltaTableSource`: a user's
    own Delta table read as a changelog)."""
    step = TableTableJoinStep(spec, columns or TableTableColumns(), quarantine_expired)
    result = incremental.run_microbatch(spark, step, root, {"left": left_source, "right": right_source},
                                        batch_id=batch_id, wait_s=wait_s)
    return TableTableReport.of(result)
