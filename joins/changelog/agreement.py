"""A two-sided table join (the table-table join, the foreign-key join) checked against its batch
form: the temporal history rows of event days as a backfill recomputes them, and the current
results against the history at the join's stream time.

- **Backfill** (`HistoryForm` under `joins.incremental.run_backfill`, the join's writer lease):
  recompute the temporal history from both changelogs as the micro-batches have consumed them
  (the versions of the last completed batch: a backfill never runs ahead of the micro-batches)
  and replace exactly the given event days (days of `valid_from`) of the join's `history` table
  in one version-guarded commit. The micro-batch output, the join's changelog, is never
  touched: it says what was emitted when; the history says what held when.
- **Check** (`compare_with_history`): the join's current result per key against the history at
  the join's stream time, every key compared in Spark, only counts collected. With both sides
  versioned they are equal unless an update arrived beyond history retention; an unversioned
  side takes the last arrival, the history the latest ts, so out-of-order updates there differ
  by design.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.changelog.expiry import stream_time_key
from joins.changelog.result import EVENT_DATE, HISTORY, SIDES, VALID_FROM, VALID_TO, has
from joins.incremental import BatchDone, BatchLog, BatchStateError, JoinRoot, Source
from joins.incremental.backfill import BackfillContext, BackfillRows
from joins.spark.exprs import count_if

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class HistoryForm:
    """The batch form of a two-sided table join: the temporal history rows of some event days.
    `history` computes the whole history from both sides' changelogs (this join's by default;
    the foreign-key join passes its own)."""

    step: Any  # the join's incremental step: its spec and columns
    history: Callable[..., DataFrame]
    target: str = HISTORY

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


@contextlib.contextmanager
def settled(root: str, app: str, wait_s: float) -> Iterator[tuple[BatchDone | None, int | None]]:
    """Under the join's lease (no micro-batch runs meanwhile): its last completed batch and the
    join's stream time (the larger of the sides' it carried; None before any update)."""
    jr = JoinRoot(root)
    with lake.Lease(jr.lease, purpose=f"{app} latest-versus-history check").held(wait_s=wait_s):
        tail = BatchLog(jr.checkpoints, app).tail()
        if tail.pending is not None:
            raise BatchStateError(f"{app}: micro-batch {tail.pending.batch_id} under {root} is "
                                  f"planned but not completed; run it before the check")
        done = tail.last_done
        times = [] if done is None else [t for s in SIDES
                                         if (t := done.carry.get(stream_time_key(s))) is not None]
        yield done, max(times) if times else None


def changelogs_read(spark: SparkSession, sources: Mapping[str, str | Source],
                    done: BatchDone) -> dict[str, DataFrame]:
    """Both sides' changelogs as the batch `done` had consumed them."""
    return {s: (src if isinstance(src, Source) else Source(src)).snapshot(spark, done.consumed[s])
            for s, src in sources.items()}


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
