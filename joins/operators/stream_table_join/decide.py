"""A micro-batch's stream side decided, in one Spark action that also counts it.

Three ways to the same `Decision` (held equal to the reference processor by the tests):

- a batch without new stream records (the Delta statistics say so) decides nothing and runs
  no job: stream time moves only by a new record;
- a batch that, with the buffer it starts from, fits `sequential.SEQUENTIAL_MAX_ROWS` (known
  before reading it: the Delta statistics of its files and the previous batch's buffered count)
  is decided record at a time in one Spark task (`sequential.py`): one stage;
- a larger one, or one whose size is not known, set-wise and distributed (`grace.py`): block
  prefix maxima, classification, evictions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins.operators.stream_table_join.grace import (
    DEFAULT_BLOCK_ROWS,
    Decision,
    resolve,
    scan_batch,
    single_block_blocks,
)
from joins.operators.stream_table_join.report import (
    NULL_TS_SEQ,
    decision_metrics,
    max_eligible_metric,
    no_records_counts,
)
from joins.operators.stream_table_join.sequential import (
    SEQUENTIAL_MAX_ROWS,
    decide_in_one_task,
    fits,
    null_ts_error,
    null_ts_record,
    sequential_decision,
)
from joins.versioned.prefix import Unknown, max_ts_if_no_nulls

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from joins.incremental import StepContext
    from joins.lake import ChangeStats
    from joins.operators.stream_table_join.spec import StreamTableJoinSpec


@dataclass(frozen=True)
class BatchDecision:
    decision: Decision               # `decided` materialized (a local checkpoint)
    counts: dict[str, Any]           # decision_metrics over it
    release: Callable[[], None]      # unpersist what deciding cached


@dataclass(frozen=True)
class Decider:
    """How one join decides its batches (the stream columns and the engine's thresholds)."""

    spec: StreamTableJoinSpec
    stream_cols: list[str]
    value_cols: list[str]
    key_col: str                     # the stream column holding the table key
    ts: str
    seq: str
    block_rows: int = DEFAULT_BLOCK_ROWS
    sequential_max_rows: int = SEQUENTIAL_MAX_ROWS
    name: str = "decide"

    def decide(self, ctx: StepContext, new: DataFrame, buffer: DataFrame | None,
               stats: ChangeStats | None, buffered: int) -> BatchDecision:
        """`new` (the batch's stream rows) and `buffer` hold `stream_cols` plus TABLE_KEY;
        `buffered` is how many rows `buffer` holds, `stats` the Delta statistics of `new`."""
        before = ctx.carry.get("stream_time")
        if stats is not None and stats.rows == 0:
            # Nothing new (a batch of table records): no job, and no read of the buffer.
            counts = no_records_counts()
            decision = sequential_decision(None, counts, self.spec, stream_cols=self.stream_cols,
                                           ts=self.ts, stream_time_before=before)
            return BatchDecision(decision, counts, lambda: None)
        if fits(None if stats is None else stats.rows, buffered, self.sequential_max_rows):
            with ctx.phase("decide"):
                frame = decide_in_one_task(new, buffer, self.spec, stream_cols=self.stream_cols,
                                           value_cols=self.value_cols, ts=self.ts, seq=self.seq,
                                           stream_time_before=before, batch_id=ctx.batch_id)
                metrics = decision_metrics(self.ts, self.seq)
                try:
                    decided, counts = ctx.checkpoint_counted(frame, metrics, f"{self.name}_decide")
                except Exception as exc:
                    found = null_ts_error(exc, ts=self.ts, seq=self.seq,
                                          source=f"stream_source {ctx.source_path('stream')!r}")
                    if found is None:
                        raise
                    raise found from None
            decision = sequential_decision(decided, counts, self.spec, stream_cols=self.stream_cols,
                                           ts=self.ts, stream_time_before=before, stamped=True)
            return BatchDecision(decision, counts, lambda: None)
        return self._set_wise(ctx, new, buffer, stats, before)

    def _set_wise(self, ctx: StepContext, new: DataFrame, buffer: DataFrame | None,
                  stats: ChangeStats | None, before: int | None) -> BatchDecision:
        span = None
        if stats is not None and self.seq in stats.min and stats.min[self.seq] is not None:
            span = (int(stats.min[self.seq]), int(stats.max[self.seq]))
        if span is None or span[1] - span[0] >= self.block_rows:
            # Read twice (block maxima, then the blocks' windows); a one-block batch is read
            # once, into `classified`'s cache.
            new = new.persist()
        with ctx.phase("stream time"):
            scanned = scan_batch(new, self.spec, value_cols=self.value_cols, ts=self.ts,
                                 seq=self.seq, stream_time_before=before,
                                 block_rows=self.block_rows, seq_span=span)
        # Three branches of the decision read it (cheaper than recomputing its window
        # per branch, even for 100 records).
        classified = scanned.classified.persist()
        blocks, st_after = scanned.blocks, scanned.stream_time_after
        if scanned.single_block:
            # Every record is eligible when some value column and (inner join) the table key
            # have no null: the largest eligible ts is then the statistics' largest ts.
            max_eligible = max_ts_if_no_nulls(
                stats, ts=self.ts, some_of=self.value_cols,
                all_of=[self.key_col] if self.spec.join == "inner" else [])
            if isinstance(max_eligible, Unknown):
                with ctx.phase("classify"):
                    max_eligible = _max_eligible(classified, self.ts)
            blocks, st_after = single_block_blocks(before, max_eligible)
        decision = resolve(classified, buffer, self.spec, blocks=blocks,
                           stream_time_after=st_after, stream_cols=self.stream_cols, ts=self.ts,
                           seq=self.seq)
        with ctx.phase("decide"):
            # One action decides the batch and counts it: the lookups read what is joined twice
            # (the keys that narrow the table's history, and the probe), the writes read the
            # quarantined and newly buffered records, and deciding evictions costs a shuffle.
            decided, counts = ctx.checkpoint_counted(
                decision.decided, decision_metrics(self.ts, self.seq), f"{self.name}_decide")
        if counts.get(NULL_TS_SEQ) is not None:
            classified.unpersist()
            new.unpersist()
            raise null_ts_record(int(counts[NULL_TS_SEQ]), ts=self.ts, seq=self.seq,
                                 source=f"stream_source {ctx.source_path('stream')!r}")

        def release() -> None:
            classified.unpersist()
            new.unpersist()

        return BatchDecision(decision.with_decided(decided), counts, release)


def _max_eligible(classified: DataFrame, ts: str) -> int | None:
    """The largest ts of the records that are not skipped (late ones included: their ts is
    below stream time, so they never raise it)."""
    row = classified.agg(max_eligible_metric(ts).alias("m")).first()
    assert row is not None
    return None if row["m"] is None else int(row["m"])
