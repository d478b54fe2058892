"""Backfills and the latest-versus-history check of the foreign-key join, by the rules every
two-sided table join follows (`joins.changelog.agreement`): the history is this join's
(`spark_batch.temporal_history`), the current result per left key its `lhs` state joined with
its `rhs` state by foreign key.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins import lake
from joins.changelog.agreement import (
    Agreement,
    HistoryForm,
    changelogs_read,
    compare_with_history,
    settled,
)
from joins.changelog.history import as_of
from joins.changelog.keyed import STATE_BATCH, latest_per_key
from joins.incremental import JoinRoot, Source
from joins.incremental.backfill import BackfillResult, run_backfill
from joins.operators.fk_join.columns import (
    APP,
    LHS,
    RHS,
    S_FK,
    S_PRESENT,
    FkColumns,
    has,
)
from joins.operators.fk_join.spark_batch import temporal_history
from joins.operators.fk_join.spark_incremental import FkJoinStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.operators.fk_join.spec import FkJoinSpec


def backfill(spark: SparkSession, spec: FkJoinSpec, root: str | JoinRoot, *, left_source: str | Source,
             right_source: str | Source, days: Sequence[str | dt.date],
             columns: FkColumns | None = None, dry_run: bool = False) -> BackfillResult:
    """Recompute the temporal history of `days` and replace those days of `<root>/history`
    in one commit (`dry_run`: only report what would change)."""
    step = FkJoinStep(spec, columns or FkColumns())
    return run_backfill(spark, step, HistoryForm(step, history=temporal_history), root,
                        {"left": left_source, "right": right_source}, days, dry_run=dry_run)


def current_results(lhs: DataFrame, rhs: DataFrame, spec: FkJoinSpec, cols: FkColumns) -> DataFrame:
    """The join's current result per left key from its state logs: key, value columns,
    has_left, has_right (keys without a result left out)."""
    from pyspark.sql import functions as F

    left = latest_per_key(lhs, cols.key).where(F.col(S_PRESENT))
    right = latest_per_key(rhs, cols.right.key).where(F.col(S_PRESENT)).select(
        F.col(cols.right.key).alias("_rk"),
        *(F.col(v).alias(f"_r_{v}") for v in cols.right_values))
    joined = left.join(right, F.col(S_FK) == F.col("_rk"), "inner" if spec.join == "inner" else "left")
    holds = F.col("_rk").isNotNull()
    return joined.select(
        F.col(cols.key), *(F.col(v).alias(cols.out("left", v)) for v in cols.left_values),
        *(F.when(holds, F.col(f"_r_{v}")).alias(cols.out("right", v)) for v in cols.right_values),
        F.lit(True).alias(has("left")), holds.alias(has("right")))


def latest_agreement(spark: SparkSession, spec: FkJoinSpec, root: str, *,
                     left_source: str | Source, right_source: str | Source,
                     columns: FkColumns | None = None, wait_s: float = 60.0) -> Agreement:
    """Compare, under the join's lease (no micro-batch runs meanwhile), the current results
    with the temporal history at the join's stream time."""
    from pyspark.sql import functions as F

    cols = columns or FkColumns()
    jr = JoinRoot(root)
    with settled(root, APP, wait_s) as (done, t):
        states = {name: lake.delta_version(jr.state(name)) for name in (LHS, RHS)}
        if done is None or t is None or states[LHS] is None:
            return Agreement(None, None if done is None else done.batch_id)
        logs = changelogs_read(spark, {"left": left_source, "right": right_source}, done)
        history = as_of(temporal_history(logs["left"], logs["right"], spec, cols), t)
        lhs = lake.read_delta(spark, jr.state(LHS), version=states[LHS])
        if states[RHS] is None:  # no right row yet: an empty right table of the input's types
            rhs = logs["right"].where(F.lit(False)).select(
                cols.right.key, *cols.right_values, F.lit(False).alias(S_PRESENT),
                F.lit(0).cast("long").alias(STATE_BATCH))
        else:
            rhs = lake.read_delta(spark, jr.state(RHS), version=states[RHS])
        return compare_with_history(current_results(lhs, rhs, spec, cols), history, cols, t,
                                    done.batch_id)
