"""Backfills and the latest-versus-history check of the primary-key join.

- **Backfill** (`backfill`): recompute the temporal history (`history.py`) from both
  changelogs as the micro-batches have consumed them (the versions of the last completed
  batch: a backfill never runs ahead of the micro-batches) and replace exactly the given event
  days (days of `valid_from`) of the join's `history` table in one version-guarded commit
  (`joins.incremental.run_backfill`, under the join's writer lease). The micro-batch output,
  the join's changelog, is never touched: it says what was emitted when; the history says what
  held when.
- **Check** (`latest_agreement`): the incremental join's current result per key (its `current`
  state) against the temporal history at the join's stream time, every key compared in Spark,
  only counts collected. With both sides versioned they are equal unless an update arrived
  beyond history retention; an unversioned side takes the last arrival, the history the
  latest ts, so out-of-order updates there differ by design.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.changelog import stream_time_key
from joins.changelog.keyed import latest_per_key
from joins.incremental import BatchLog, BatchStateError, JoinRoot, Source
from joins.incremental.backfill import (
    BackfillContext,
    BackfillResult,
    BackfillRows,
    run_backfill,
)
from joins.operators.table_table_join.columns import (
    APP,
    CURRENT,
    EVENT_DATE,
    HISTORY,
    SIDES,
    VALID_FROM,
    VALID_TO,
    TableTableColumns,
    has,
    present,
)
from joins.operators.table_table_join.history import as_of, temporal_history
from joins.operators.table_table_join.spark_incremental import TableTableJoinStep
from joins.spark.exprs import count_if

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.operators.table_table_join.spec import TableTableJoinSpec


@dataclass
class HistoryForm:
    """The batch form of a two-sided table join: the temporal history rows of some event days.
    `history` computes the whole history from both sides' changelogs (this join's by default;
    the foreign-key join passes its own)."""

    step: Any  # the join's incremental step: its spec and columns
    target: str = HISTORY
    history: Callable[..., DataFrame] = temporal_history

    def backfill_rows(self, ctx: BackfillContext, days: list[dt.date]) -> BackfillRows:
        from pyspark.sql import functions as F

        versions = {side: ctx.consumed(side) for side in SIDES}
        counts: dict[str, Any] = {f"{side}_version": v for side, v in versions.items()}
        if any(v is None for v in versions.values()):
            return BackfillRows(None, counts=counts)  # no micro-batch yet: nothing to agree with
        changelogs = {side: ctx.sources[side].snapshot(ctx.spark, v)  # type: ignore[arg-type]
                      for side, v in versions.items()}
        cols = self.step.cols
        history = self.history(changelogs["left"], changelogs["right"], self.step.spec, cols)
        rows = history.where(F.col(EVENT_DATE).isin(days))
        return BackfillRows(rows, identity=(cols.key, VALID_FROM),
                            compared=(*result_columns(cols), VALID_TO), counts=counts)


def result_columns(cols: Any) -> tuple[str, ...]:
    """What a result holds besides its key: both sides' value columns and their presence."""
    return (*cols.out_values("left"), *cols.out_values("right"), has("left"), has("right"))


def backfill(spark: SparkSession, spec: TableTableJoinSpec, root: str, *,
             left_source: str | Source, right_source: str | Source, days: Sequence[str | dt.date],
             columns: TableTableColumns | None = None, dry_run: bool = False) -> BackfillResult:
    """Recompute the temporal history of `days` and replace those days of `<root>/history`
    in one commit (`dry_run`: only report what would change)."""
    step = TableTableJoinStep(spec, columns or TableTableColumns())
    return run_backfill(spark, step, HistoryForm(step), root,
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


@dataclass(frozen=True)
class Agreement:
    """The incremental join's current results against the history at `stream_time`."""

    stream_time: int | None
    batch_id: int | None
    keys_incremental: int = 0
    keys_history: int = 0
    only_incremental: int = 0
    only_history: int = 0
    different: int = 0

    @property
    def agrees(self) -> bool:
        return self.only_incremental == 0 and self.only_history == 0 and self.different == 0


def latest_agreement(spark: SparkSession, spec: TableTableJoinSpec, root: str, *,
                     left_source: str | Source, right_source: str | Source,
                     columns: TableTableColumns | None = None,
                     wait_s: float = 60.0) -> Agreement:
    """Compare, under the join's lease (no micro-batch runs meanwhile), the current results
    with the temporal history at the join's stream time."""

    cols = columns or TableTableColumns()
    jr = JoinRoot(root)
    with lake.Lease(jr.lease, purpose=f"{APP} latest-versus-history check").held(wait_s=wait_s):
        tail = BatchLog(jr.checkpoints, APP).tail()
        if tail.pending is not None:
            raise BatchStateError(f"{APP}: micro-batch {tail.pending.batch_id} under {root} is "
                                  f"planned but not completed; run it before the check")
        done = tail.last_done
        times = [] if done is None else [t for s in SIDES
                                         if (t := done.carry.get(stream_time_key(s))) is not None]
        state_version = lake.delta_version(jr.state(CURRENT))
        if done is None or not times or state_version is None:
            return Agreement(None, None if done is None else done.batch_id)
        t = max(times)
        sources = {s: src if isinstance(src, Source) else Source(src)
                   for s, src in (("left", left_source), ("right", right_source))}
        changelogs = {s: sources[s].snapshot(spark, done.consumed[s]) for s in SIDES}
        history = as_of(temporal_history(changelogs["left"], changelogs["right"], spec, cols), t)
        state = lake.read_delta(spark, jr.state(CURRENT), version=state_version)
        return compare_with_history(current_results(state, spec, cols), history, cols, t,
                                    done.batch_id)


def compare_with_history(current: DataFrame, history: DataFrame, cols: Any, stream_time: int,
                         batch_id: int) -> Agreement:
    """Every key's current result against the history's, compared in Spark (counts only)."""
    from pyspark.sql import functions as F

    compared = result_columns(cols)
    mine = current.select(F.col(cols.key).alias("_k"), F.struct(*compared).alias("_inc"))
    theirs = history.select(F.col(cols.key).alias("_k"), F.struct(*compared).alias("_hist"))
    both = mine.join(theirs, "_k", "full_outer")
    inc, hist = F.col("_inc").isNotNull(), F.col("_hist").isNotNull()
    row = both.agg(count_if(inc).alias("ni"), count_if(hist).alias("nh"),
                   count_if(inc & ~hist).alias("oi"), count_if(hist & ~inc).alias("oh"),
                   count_if(inc & hist & ~F.col("_inc").eqNullSafe(F.col("_hist"))).alias("d"),
                   ).first()
    assert row is not None
    return Agreement(stream_time, batch_id, int(row["ni"]), int(row["nh"]), int(row["oi"]),
                     int(row["oh"]), int(row["d"]))
