"""The watermarks of one micro-batch, decided on the driver before any row is touched.

A batch's watermark records are few (the explicit ones in its input, plus one derived per time
column at its end: max event time seen minus the side's allowed lag), and everything the
reference processor does with them depends on the watermarks alone (`JoinState`, the same code):
the last received value of each column (lateness), the lower bounds (out of bounds, eviction)
and the output watermarks. So the batch is cut at its watermark records into segments: every
row of segment s sees the same watermarks, and a buffered row leaves at the first record that
lifts a lower bound above one of its times. Only the output watermark of a column without a
bound needs the rows (the minimum buffered value): `emit` takes those minima from Spark.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from joins.operators.interval_join.state import JoinState
from joins.sql import ColumnRef, JoinConditionPlan

# Positions of the watermarks derived at the end of a batch: after every row of it.
END_POS = 1 << 62


@dataclass(frozen=True)
class WatermarkEvent:
    pos: int              # where in the batch (rows before it do not see it)
    column: ColumnRef
    ts: int
    derived: bool = False


@dataclass(frozen=True)
class Segment:
    """What the rows between two watermark records see."""

    received: dict[ColumnRef, int]   # last received watermark per column (lateness)
    floors: dict[ColumnRef, int]     # lower bound per bounded column (out of bounds)
    watermarked: frozenset[ColumnRef]


@dataclass
class Timeline:
    plan: JoinConditionPlan
    events: list[WatermarkEvent]
    segments: list[Segment]                       # len(events) + 1
    advanced: list[bool]                          # per event: did it advance its column?
    # (event index, lower bounds after it) for every event that evicts (advanced, with targets).
    evictions: list[tuple[int, dict[ColumnRef, int]]]
    final: JoinState
    start: JoinState
    emitted: list[tuple[int, ColumnRef, int]] = field(default_factory=list)

    @property
    def positions(self) -> list[int]:
        return [e.pos for e in self.events]

    def unbound_minima_needed(self) -> list[tuple[int, ColumnRef]]:
        """(event index, column) whose output watermark needs the minimum buffered value."""
        needed: list[tuple[int, ColumnRef]] = []
        state = copy.deepcopy(self.start)
        for q, event in enumerate(self.events):
            if self._receive(state, event):
                needed += [(q, c) for c in sorted(state.watermarked) if not state.bounded(c)]
        return needed

    def emit(self, minima: Mapping[tuple[int, ColumnRef], int | None] | None = None) -> JoinState:
        """The output watermarks of every event (into `emitted`), minima from Spark; returns
        the state after the batch (last emitted values included)."""
        state = copy.deepcopy(self.start)
        self.emitted = []
        for q, event in enumerate(self.events):
            if not self._receive(state, event):
                continue
            for column, value in state.emit_watermarks(
                    self.plan.schema, lambda c, q=q: (minima or {}).get((q, c))):
                self.emitted.append((q, column, value))
        self.final = state
        return state

    def _receive(self, state: JoinState, event: WatermarkEvent) -> bool:
        return state.receive_watermark(self.plan, event.column, event.ts)


def _floors(state: JoinState) -> dict[ColumnRef, int]:
    return {c: f for c in state.wm_state if (f := state.lower_bound(c)) is not None}


def _segment(state: JoinState) -> Segment:
    return Segment(dict(state.last_received), _floors(state), frozenset(state.watermarked))


def build_timeline(plan: JoinConditionPlan, start: JoinState,
                   events: list[WatermarkEvent]) -> Timeline:
    """Segments, evictions and the state after `events` (sorted by position) from `start`."""
    ordered = sorted(events, key=lambda e: e.pos)
    state = copy.deepcopy(start)
    segments = [_segment(state)]
    advanced: list[bool] = []
    evictions: list[tuple[int, dict[ColumnRef, int]]] = []
    for q, event in enumerate(ordered):
        moved = state.receive_watermark(plan, event.column, event.ts)
        advanced.append(moved)
        if moved and plan.postpone_times.get(event.column):
            evictions.append((q, _floors(state)))
        segments.append(_segment(state))
    return Timeline(plan, ordered, segments, advanced, evictions, state, copy.deepcopy(start))


def state_of(carry: Mapping[str, Any], plan: JoinConditionPlan) -> JoinState:
    """The watermark part of the join state carried from the last batch (buffers are tables)."""
    data = carry.get("watermarks")
    if not data:
        return JoinState.initial(plan)
    return JoinState.from_json({**data, "buffers": {"left": [], "right": []}}, plan)


def carry_of(state: JoinState, plan: JoinConditionPlan) -> dict[str, Any]:
    data = state.to_json(plan.schema)
    data.pop("buffers")
    return data
