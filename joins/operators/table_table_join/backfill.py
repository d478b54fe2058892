"""Backfills and the latest-versus-history check of the primary-key join, by the rules every
two-sided table join follows (`joins.changelog.agreement`): the history is this join's
(`history.py`), the current result per key its `current` state.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins import lake
from joins.changelog.agreement import Agreement, HistoryForm, changelogs_read, compare_with_history, settled
from joins.changelog.history import as_of
from joins.changelog.keyed import latest_per_key
from joins.incremental import JoinRoot, Source
from joins.incremental.backfill import (
    BackfillResult,
    run_backfill,
)
from joins.operators.table_table_join.columns import (
    APP,
    CURRENT,
    SIDES,
    TableTableColumns,
    has,
    present,
)
from joins.operators.table_table_join.history import temporal_history
from joins.operators.table_table_join.spark_incremental import TableTableJoinStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.operators.table_table_join.spec import TableTableJoinSpec


def backfill(spark: SparkSession, spec: TableTableJoinSpec, root: str | JoinRoot, *,
             left_source: str | Source, right_source: str | Source, days: Sequence[str | dt.date],
             columns: TableTableColumns | None = None, dry_run: bool = False) -> BackfillResult:
    """Recompute the temporal history of `days` and replace those days of `<root>/history`
    in one commit (`dry_run`: only report what would change)."""
    step = TableTableJoinStep(spec, columns or TableTableColumns())
    return run_backfill(spark, step, HistoryForm(step, temporal_history), root,
                        {"left": left_source, "right": right_source}, days, dry_run=dry_run)


def current_results(state: DataFrame, spec: TableTableJoinSpec, cols: TableTableColumns) -> DataFrame:
    """The join's current result per key from its `current` state log: key, value columns,
    has_left, has_right (keys without a result left out)."""
    from pyspark.sql import functions as F

    latest = latest_per_key(state, cols.key)
    holds = {s: F.coalesce(F.col(present(s)), F.lit(False)) for s in SIDES}
    exists = {"inner": holds["left"] & holds["right"], "left": holds["left"],
              "outer": holds["left"] | holds["right"]}[spec.join]
    out = [F.col(cols.key)]
    for side in SIDES:
        out += [F.when(holds[side], F.col(c)).alias(c) for c in cols.out_values(side)]
    return latest.where(exists).select(*out, *(holds[s].alias(has(s)) for s in SIDES))


def latest_agreement(spark: SparkSession, spec: TableTableJoinSpec, root: str, *,
                     left_source: str | Source, right_source: str | Source,
                     columns: TableTableColumns | None = None,
                     wait_s: float = 60.0) -> Agreement:
    """Compare, under the join's lease (no micro-batch runs meanwhile), the current results
    with the temporal history at the join's stream time."""

    cols = columns or TableTableColumns()
    with settled(root, APP, wait_s) as (done, t):
        state_version = lake.delta_version(JoinRoot(root).state(CURRENT))
        if done is None or t is None or state_version is None:
            return Agreement(None, None if done is None else done.batch_id)
        logs = changelogs_read(spark, {"left": left_source, "right": right_source}, done)
        history = as_of(temporal_history(logs["left"], logs["right"], spec, cols), t)
        state = lake.read_delta(spark, JoinRoot(root).state(CURRENT), version=state_version)
        return compare_with_history(current_results(state, spec, cols), history, cols, t,
                                    done.batch_id)
