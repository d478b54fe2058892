"""The interval join on the incremental runtime, one micro-batch at a time (seed 003).

A batch does what the reference processor does with the same records in the same order:

1. watermarks (`timeline.py`, on the driver): the batch's explicit watermark records and the
   derived ones (max event time seen - allowed lag, after every row) cut it into segments, each
   with its last received watermarks and lower bounds;
2. rows (`classify.py`): each new row is invalid, late, filtered, out of bounds or buffered, and
   a buffered row (new, or old from the buffer tables) gets the watermark record that evicts it;
3. one aggregate counts the classes (`counts.py`): the buffer sizes, and the `max_buffered_rows`
   check, which fails the batch before anything is committed;
4. pairs (`pairs.py`): the batch against the opposite buffer, by keys and time bins, materialized
   once (the output, the flags and the null-padded rows all read it);
5. writes: output (pairs, null-padded rows, output watermarks), quarantine, the new buffered rows
   (append) and the flags of old rows that joined (`used`, append). Evicted rows are not
   written at all: the carried lower bounds filter them out (`buffer.py`).

The runtime does the rest (lease, plan, pinned reads, idempotent commits, done record). The
carry holds the watermark state (last received and emitted per column, wmState), the max event
time seen per time column and the buffer sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins import incremental
from joins.incremental import BatchLog, Outcome, StepContext, StepResult, Written
from joins.operators.interval_join.bins import time_window
from joins.operators.interval_join.buffer import (
    BUFFER,
    STATE_TABLES,
    batch_entries,
    buffered_rows,
    compact,
    read_entries,
    used_seqs,
)
from joins.operators.interval_join.classify import (
    BUFFERED,
    CLASS,
    EVICT,
    INVALID,
    LATE,
    classify,
    evict_index,
)
from joins.operators.interval_join.columns import (
    EVENT_DATE,
    JOINED,
    KIND,
    WATERMARK,
    JoinLayout,
)
from joins.operators.interval_join.counts import (
    BatchCounts,
    buffered_minima,
    count_batch,
    limit_breach,
    raise_limit,
)
from joins.operators.interval_join.inputs import (
    OrderMode,
    batch_range,
    derived_events,
    explicit_events,
    max_seen,
    read_side,
)
from joins.operators.interval_join.output import (
    finish_output,
    null_pads,
    quarantine_rows,
    shape,
    watermark_rows,
)
from joins.operators.interval_join.pairs import (
    BROADCAST_MAX_ROWS,
    batch_pairs,
    matched_seqs,
    narrowed,
    old_rows,
    pairing_sides,
)
from joins.operators.interval_join.report import IntervalBatchReport
from joins.operators.interval_join.timeline import Timeline, build_timeline, carry_of, state_of
from joins.spark.exprs import count_if
from joins.spark.frames import checkpointed, release_checkpoint, worth_checkpointing
from joins.sql import SIDES, ColumnRef, Side
from joins.sql.columns import other_side

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from joins.operators.interval_join.spec import IntervalJoinSpec

APP = "interval_join"


@dataclass
class IntervalJoinStep:
    """The interval join as an incremental operator (inputs `left` and `right`).

    lag_ms: per side, the allowed lag of its derived watermarks (None: the input carries its
        own watermark records, or none). order: how a batch's rows are ordered (`inputs.py`).
    """

    spec: IntervalJoinSpec
    layout: JoinLayout
    lag_ms: dict[Side, int | None] = field(default_factory=lambda: {"left": None, "right": None})
    order: OrderMode = "arrival"
    bin_ms: int | None = None
    name: str = APP
    inputs: tuple[str, ...] = ("left", "right")

    @property
    def state_tables(self) -> tuple[incremental.StateTable, ...]:
        return STATE_TABLES

    def after_done(self, ctx: StepContext) -> None:
        done = BatchLog(ctx.root.checkpoints, self.name).tail().last_done
        if done is None:
            return
        state = state_of(done.carry, self.spec.plan)
        floors = {c: f for c in state.wm_state if (f := state.lower_bound(c)) is not None}
        compact(ctx.spark, ctx.root, self.layout, floors)

    def step(self, ctx: StepContext) -> StepResult:
        from pyspark.sql import functions as F

        plan, layout, carry = self.spec.plan, self.layout, ctx.carry
        held: dict[Side, int] = {s: int(carry.get("buffered", {}).get(s, 0)) for s in SIDES}
        raw: dict[Side, DataFrame] = {}
        marked: dict[Side, bool] = {}
        with ctx.phase("read"):
            for side in SIDES:
                layout = layout.with_kinds(side, ctx.schema(side))
            for side in SIDES:
                raw[side], marked[side] = read_side(ctx, layout, side, self.order)
            table = read_entries(ctx)
        with ctx.phase("watermarks"):
            events = explicit_events(ctx, layout, marked, self.order)
            seen = {s: max_seen(ctx, layout, s, carry.get("max_seen", {})) for s in SIDES}
            events += derived_events(layout, self.lag_ms, seen)
            timeline = build_timeline(plan, state_of(carry, plan), events)
        new, old = {}, {}
        small = all(worth_checkpointing(ctx.new_rows(s)) for s in SIDES)
        for side in SIDES:
            evict = evict_index(layout, side, timeline)
            # Read by the count, pairs, padded rows and buffer: materialized once. A batch of
            # up to CHECKPOINT_MAX_ROWS a side (joins/spark/frames.py) is checkpointed, so the
            # dozens of frames built on it start from a leaf and Spark's analysis of each stays
            # small; a larger one is cached as the count reads it (no extra pass over its rows).
            classified = classify(raw[side], layout, side, timeline).withColumn(
                EVICT, F.when(F.col(CLASS) == BUFFERED, evict))
            with ctx.phase("classify"):
                # Lazy either way: the class counts are the first job to read it.
                new[side] = checkpointed(classified, eager=False) if small else classified.persist()
            buffered = buffered_rows(table, layout, side, timeline.segments[0].floors)
            old[side] = None if buffered is None else buffered.withColumn(EVICT, evict)
        evicted_old = {s: None if old[s] is None else old[s].where(F.col(EVICT).isNotNull())
                       for s in SIDES}
        with ctx.phase("count"):
            counts = count_batch(new, evicted_old)
        limit = self.spec.max_buffered_rows
        if limit is not None:
            breach = limit_breach(counts, held, len(timeline.segments), limit)
            if breach is not None:
                raise_limit(new, counts, held, breach, limit, self.name)
        needed = timeline.unbound_minima_needed()
        with ctx.phase("watermarks"):
            minima = buffered_minima(needed, timeline.positions, layout, new, old) if needed else {}
            timeline.emit(minima)
        pairs = self._pairs(ctx, layout, new, old, counts)
        def matched(side: Side) -> DataFrame | None:
            if pairs is None:
                return None
            return matched_seqs(pairs, side, rows=counts.rows(side) + held[side])

        # Without pairs, a zero-row frame of both sides' columns keeps the output's columns
        # and types whatever parts the batch has.
        parts = [pairs.withColumn(KIND, F.lit(JOINED)) if pairs is not None else shape(layout, new),
                 *null_pads(layout, timeline, new, evicted_old, lambda side: used_seqs(table, side),
                            matched, counts)]
        markers = watermark_rows(ctx.spark, layout, timeline)
        if markers is not None:
            parts.append(markers)
        output = Written(finish_output(parts, layout, ctx.batch_id), metrics={
            "joined": count_if(F.col(KIND) == JOINED),
            "left_padded": count_if(F.col(KIND) == "left"),
            "right_padded": count_if(F.col(KIND) == "right"),
            "watermarks": count_if(F.col(KIND) == WATERMARK)})
        quarantine = None
        late_q = self.spec.late == "quarantine"
        if any(counts.of(s, INVALID) or (late_q and counts.of(s, LATE)) for s in SIDES):
            quarantine = Written(quarantine_rows(layout, timeline, new, ctx.batch_id, late_q))
        written = batch_entries(self.layout, new, pairs, old, counts)
        state = {BUFFER: Written(written)} if written is not None else {}
        def release() -> None:
            for frame in new.values():
                if small:
                    release_checkpoint(frame)
                else:
                    frame.unpersist()
            if pairs is not None:
                release_checkpoint(pairs)

        return StepResult(output=output, quarantine=quarantine, state=state,
                          finish=self._finisher(ctx, timeline, counts, held, seen, marked),
                          release=release)

    def _pairs(self, ctx: StepContext, layout: JoinLayout, new: dict[Side, DataFrame],
               old: dict[Side, DataFrame | None], counts: BatchCounts) -> DataFrame | None:
        """The batch's pairs, built only in the directions its counts allow (`pairing_sides`);
        None when there are none."""
        from pyspark.sql import functions as F

        later = pairing_sides(counts, {s: old[s] is not None for s in SIDES})
        if not later:
            return None
        candidates: dict[Side, DataFrame | None] = {}
        for side in later:
            earlier = other_side(side)
            if old[earlier] is None:
                candidates[earlier] = None
                continue
            lo, hi = batch_range(ctx, layout, side)
            candidates[earlier] = old_rows(narrowed(old[earlier], layout, earlier, lo, hi),
                                           F.col(EVICT))
        rows = sum(n for (_s, _c), n in counts.by_class.items())
        with ctx.phase("pairs"):
            # Materialized once, by the first of the output, the flags and the null-padded
            # rows to run (no job of its own).
            return checkpointed(batch_pairs(layout, new, candidates,
                                            time_window(layout, self.bin_ms),
                                            broadcast=rows <= BROADCAST_MAX_ROWS,
                                            batch_id=ctx.batch_id, later_sides=later), eager=False)

    def _finisher(self, ctx: StepContext, timeline: Timeline, counts: BatchCounts,
                  held: dict[Side, int], seen: dict[Side, dict[ColumnRef, int]],
                  marked: dict[Side, bool]) -> Any:
        plan, spec = self.spec.plan, self.spec
        schema = plan.schema

        def finish(outcome: Outcome) -> tuple[dict[str, Any], dict[str, Any]]:
            final = timeline.final
            after = {s: held[s] + counts.of(s, BUFFERED) - counts.evicted_rows(s) for s in SIDES}

            def per_side(klass: str, on: bool = True) -> dict[str, int]:
                return {s: counts.of(s, klass) if on else 0 for s in SIDES}

            joined = int(outcome.metric("output", "joined"))
            padded = {s: int(outcome.metric("output", f"{s}_padded")) for s in SIDES}
            ranges = ctx.plan.ranges
            report = IntervalBatchReport(
                batch_id=ctx.batch_id,
                input_versions={s: None if ranges[s].empty else (ranges[s].first, ranges[s].last)
                                for s in SIDES},
                rows_in={s: sum(n for (x, _c), n in counts.by_class.items() if x == s) for s in SIDES},
                watermark_records=len(timeline.events),
                late_dropped=per_side(LATE, spec.late == "drop"),
                late_quarantined=per_side(LATE, spec.late == "quarantine"),
                invalid=per_side(INVALID), filtered=per_side("filtered"),
                out_of_bounds=per_side("out_of_bounds"), buffered=per_side(BUFFERED),
                evicted={s: counts.evicted_rows(s) for s in SIDES}, null_padded=padded,
                joined_rows=joined, rows_out=joined + sum(padded.values()),
                watermarks_emitted=len(timeline.emitted), buffered_after=after,
                watermarks_in={schema.watermark_name(c): v
                               for c, v in sorted(final.last_received.items())},
                watermarks_out={schema.watermark_name(c): v
                                for c, v in sorted(final.last_emitted.items())},
                event_days_touched=tuple(d for d in outcome.partition_values("output", EVENT_DATE)
                                         if d is not None))
            next_carry = {
                "watermarks": carry_of(final, plan), "buffered": after,
                "max_seen": {schema.watermark_name(c): v for s in SIDES for c, v in seen[s].items()}}
            return next_carry, report.to_dict()

        return finish
