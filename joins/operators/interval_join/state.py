"""The interval join's state (seed 003): buffers of rows with their unused flag, the keyed
watermarks and wmState, and their snapshot as plain JSON-able data."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from joins.errors import ConfigError
from joins.sql import SIDES, ColumnRef, JoinConditionPlan, Schema, Side

SNAPSHOT_VERSION = 1


@dataclass
class BufferedRow:
    """A row held until no future row of the other input can join it. `unused` stays True until
    it joins; an outer side emits it null-padded on eviction only if it is still unused (saved in
    snapshots so that a restart never emits both a joined and a null-padded row for it)."""

    row: dict[str, Any]
    unused: bool = True


@dataclass
class JoinState:
    """Everything a restart must carry over.

    - `watermarked`: columns whose watermark is tracked; the time-bound columns from the start,
      plus any other column of an input once a watermark names it (seed 003's join2 carries
      `o.time` on its left input without a bound on it);
    - `last_received` / `last_emitted`: per watermark key; absent means -inf;
    - `wm_state`: outputWmKey -> inputWmKey -> received watermark minus postpone time, for the
      keys of the postpone-time map; absent means -inf.
    """

    watermarked: set[ColumnRef]
    wm_state: dict[ColumnRef, dict[ColumnRef, int]]
    last_received: dict[ColumnRef, int] = field(default_factory=dict)
    last_emitted: dict[ColumnRef, int] = field(default_factory=dict)
    buffers: dict[Side, list[BufferedRow]] = field(
        default_factory=lambda: {"left": [], "right": []})

    @classmethod
    def initial(cls, plan: JoinConditionPlan) -> JoinState:
        outputs = {bounded for targets in plan.postpone_times.values() for bounded, _ in targets}
        return cls(watermarked=set(plan.time_columns), wm_state={c: {} for c in outputs})

    def lower_bound(self, column: ColumnRef) -> int | None:
        """max over wmState[column]: rows with column below it can never join a future row.
        None is -inf (no watermark of a related column yet, or no bound on this column)."""
        inner = self.wm_state.get(column)
        return max(inner.values()) if inner else None

    def bounded(self, column: ColumnRef) -> bool:
        """Is `column` the bounded side of some time bound (an output key of wmState)?"""
        return column in self.wm_state

    def receive_watermark(self, plan: JoinConditionPlan, column: ColumnRef, ts: int) -> bool:
        """Seed 003, algorithm step 5.1: a watermark of `column`. False (nothing changes but the
        column becoming watermarked) when it does not advance the column's last received one;
        else wmState of every output key it bounds is set to ts - postpone time."""
        self.watermarked.add(column)
        last = self.last_received.get(column)
        if last is not None and ts <= last:
            return False
        self.last_received[column] = ts
        for bounded, postpone_ms in plan.postpone_times.get(column, ()):
            self.wm_state[bounded][column] = ts - postpone_ms
        return True

    def output_watermark(self, column: ColumnRef, min_buffered: int | None) -> int | None:
        """What the output watermark of `column` may be now (None: nothing yet).

        A bounded column uses the fault-tolerant formula of seed 003, min(last received,
        wmState): it depends only on received watermarks, so a restart emits the same. A column
        that no bound relates to the other input (o.time on join2's left input) has no wmState
        at all, so that formula would never let it advance and a downstream join on it would
        stall: it uses the formula of seed 003's algorithm section instead, min(last received,
        minimum buffered value) (`min_buffered`: None for an empty buffer). Our buffers are
        restored exactly, so that is deterministic across restarts too.
        """
        received = self.last_received.get(column)
        if received is None:
            return None
        if self.bounded(column):
            floor = self.lower_bound(column)
            return None if floor is None else min(received, floor)
        return received if min_buffered is None else min(received, min_buffered)

    def emit_watermarks(self, schema: Schema,
                        min_buffered: Callable[[ColumnRef], int | None],
                        ) -> list[tuple[ColumnRef, int]]:
        """Step 5.6: the output watermarks that increase, in schema order (recorded as emitted).
        `min_buffered(column)` is only asked for columns without a bound."""
        out: list[tuple[ColumnRef, int]] = []
        for column in schema.ordered(self.watermarked):
            value = self.output_watermark(
                column, None if self.bounded(column) else min_buffered(column))
            emitted = self.last_emitted.get(column)
            if value is None or (emitted is not None and value <= emitted):
                continue
            self.last_emitted[column] = value
            out.append((column, value))
        return out

    def buffered(self) -> int:
        return sum(len(rows) for rows in self.buffers.values())

    def to_json(self, schema: Schema) -> dict[str, Any]:
        name = schema.watermark_name

        def by_name(values: Mapping[ColumnRef, int]) -> dict[str, int]:
            return {name(c): values[c] for c in schema.ordered(values)}

        return {
            "watermarked_columns": [name(c) for c in schema.ordered(self.watermarked)],
            "last_received": by_name(self.last_received),
            "last_emitted": by_name(self.last_emitted),
            "wm_state": {name(out): by_name(inner) for out, inner in
                         ((c, self.wm_state[c]) for c in schema.ordered(self.wm_state)) if inner},
            "buffers": {side: [{"row": copy.deepcopy(entry.row), "unused": entry.unused}
                               for entry in self.buffers[side]] for side in SIDES},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], plan: JoinConditionPlan) -> JoinState:
        schema = plan.schema
        try:
            def refs(names: Iterable[str]) -> set[ColumnRef]:
                return {schema.ref_of_watermark_name(n) for n in names}

            def by_ref(values: Mapping[str, int]) -> dict[ColumnRef, int]:
                return {schema.ref_of_watermark_name(n): int(v) for n, v in values.items()}

            state = cls.initial(plan)
            state.watermarked |= refs(data["watermarked_columns"])
            state.last_received = by_ref(data["last_received"])
            state.last_emitted = by_ref(data["last_emitted"])
            for out, inner in data["wm_state"].items():
                state.wm_state[schema.ref_of_watermark_name(out)] = by_ref(inner)
            state.buffers = {side: [BufferedRow(copy.deepcopy(dict(e["row"])), bool(e["unused"]))
                                    for e in data["buffers"][side]] for side in SIDES}
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"interval_join snapshot is malformed: {exc!r}") from None
        return state


def check_snapshot_version(snapshot: Mapping[str, Any]) -> None:
    version = snapshot.get("version") if isinstance(snapshot, Mapping) else None
    if version != SNAPSHOT_VERSION:
        raise ConfigError(f"interval_join snapshot: unsupported version {version!r} "
                          f"(expected {SNAPSHOT_VERSION})")
