"""The reference interval (stream-to-stream) join processor: seed 003's algorithm, record at a time.

On a watermark of key K (seed 003, "Algorithm" step 5):
  1. for each (outputKey, postponeTime) in postponeTimeMap[K]: wmState[outputKey][K] = wm - postpone;
  2. the lower bound of each output key is the maximum of its wmState entries;
  3. rows with any time column below its lower bound are evicted from both buffers;
  4. an evicted row of an outer side that never joined is emitted null-padded;
  5-6. each key's output watermark is min(last received, lower bound) - the fault-tolerant
     formula at the end of seed 003, which depends only on received watermarks, never on what
     happens to be buffered - emitted only when it increases. A watermarked column that no
     bound relates to the other input (o.time on seed 003's join2) has no lower bound; it uses
     min(last received, minimum buffered value) so that a downstream join on it still advances
     (`JoinState.output_watermark`).
On a row (step 6):
  1. late (a time column below the last received watermark of that column): with `late: drop`
     (seed 003) dropped and counted in `metrics["late_rows_dropped"]`; with `late: quarantine`
     emitted as `{"quarantined": {"side", "row"}, "reason"}` (`late_rows_quarantined`);
  then (seed 003, "Join conditions involving only one input") a row failing its side's one-input
  conjuncts is never buffered, and is emitted null-padded at once if its side is outer;
  2. out of bounds per wmState (a time column below its lower bound): joined with the opposite
     buffer but not buffered, null-padded at once if outer and unmatched;
  3. otherwise buffered (unused) - `max_buffered_rows` caps both buffers together;
  4. joined with every row of the opposite buffer for which the whole condition is TRUE, in
     buffer (arrival) order.

Output watermarks: `output_watermarks="min_buffer"` switches to the formula of seed 003's
algorithm section and walk-through (min of last received and the minimum time still buffered),
kept so that tests can replay the seed's walk-through verbatim; the replay engine uses the
fault-tolerant default. A watermark that does not advance its key is ignored (counted in
`metrics["stale_watermarks_ignored"]`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal

from joins.core.operator import Item
from joins.errors import InputRecordError, StateLimitError
from joins.operators.interval_join.spec import (
    OPERATOR,
    IntervalJoinRecord,
    IntervalJoinSpec,
    late_reason,
)
from joins.operators.interval_join.state import (
    SNAPSHOT_VERSION,
    BufferedRow,
    JoinState,
    check_snapshot_version,
)
from joins.operators.interval_join.validate import SOURCE, validate_row, watermark_column
from joins.spec import parse_spec
from joins.sql import (
    SIDES,
    ColumnRef,
    EvaluationError,
    Predicate,
    Side,
)
from joins.sql.columns import other_side

WatermarkPolicy = Literal["wm_state", "min_buffer"]
WATERMARK_POLICIES: tuple[WatermarkPolicy, ...] = ("wm_state", "min_buffer")

COUNTERS: tuple[str, ...] = (
    "rows_received",
    "watermarks_received",
    "late_rows_dropped",
    "late_rows_quarantined",
    "stale_watermarks_ignored",
    "rows_filtered",
    "rows_out_of_bounds",
    "rows_buffered",
    "rows_evicted",
    "joined_rows_emitted",
    "null_padded_rows_emitted",
    "watermarks_emitted",
)



def _joined(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> Item:
    # Copies, so that a consumer editing an output row cannot change a buffered row.
    return {"row": {"l": None if left is None else dict(left),
                    "r": None if right is None else dict(right)}}


class IntervalJoinProcessor:
    """Seed 003's StreamToStreamJoinP over JSON rows; see the module docstring."""

    def __init__(self, spec: IntervalJoinSpec, *,
                 output_watermarks: WatermarkPolicy = "wm_state") -> None:
        if output_watermarks not in WATERMARK_POLICIES:
            raise ValueError(f"output_watermarks must be one of {WATERMARK_POLICIES}, "
                             f"got {output_watermarks!r}")
        self.spec = spec
        self.plan = spec.plan
        self.schema = self.plan.schema
        self.output_watermarks: WatermarkPolicy = output_watermarks
        self.state = JoinState.initial(self.plan)
        self._counts: Counter[str] = Counter({name: 0 for name in COUNTERS})

    # -- public API --------------------------------------------------------------------------

    def process(self, record: IntervalJoinRecord) -> list[Item]:
        if record.watermark is not None:
            ((column, ts),) = record.watermark.items()
            return self._on_watermark(record.side, column, ts, record.i)
        assert record.row is not None  # parse_interval_join_record guarantees one of the two
        return self._on_row(record.side, record.row, record.i)

    @property
    def metrics(self) -> dict[str, int]:
        """Counters since the start (carried across snapshots) and the current buffer sizes."""
        return {**self._counts, "left_buffered": len(self.state.buffers["left"]),
                "right_buffered": len(self.state.buffers["right"])}

    def snapshot(self) -> dict[str, Any]:
        """The whole processor as plain JSON-able data (see `restore`)."""
        return {
            "version": SNAPSHOT_VERSION,
            "operator": OPERATOR,
            "config": self.spec.model_dump(mode="json"),
            "output_watermarks": self.output_watermarks,
            **self.state.to_json(self.schema),
            "metrics": dict(self._counts),
        }

    @classmethod
    def restore(cls, snapshot: Mapping[str, Any]) -> IntervalJoinProcessor:
        """A fresh processor continuing exactly where the snapshotted one stopped."""
        check_snapshot_version(snapshot)
        spec = parse_spec(IntervalJoinSpec, snapshot.get("config"), operator=OPERATOR)
        processor = cls(spec, output_watermarks=snapshot.get("output_watermarks", "wm_state"))
        processor.state = JoinState.from_json(snapshot, processor.plan)
        processor._counts.update({k: int(v) for k, v in snapshot.get("metrics", {}).items()})
        return processor

    # -- rows ----------------------------------------------------------------------------------

    def _time_columns(self, side: Side) -> list[ColumnRef]:
        return self.schema.ordered(c for c in self.state.watermarked if c.side == side)

    def _validate_row(self, side: Side, row: Mapping[str, Any], index: int) -> None:
        validate_row(self.plan, self.state.watermarked, side, row, index)

    def _late_column(self, side: Side, row: Mapping[str, Any]) -> ColumnRef | None:
        """The first time column (config order) below its last received watermark, if any."""
        for c in self._time_columns(side):
            if c in self.state.last_received and row[c.name] < self.state.last_received[c]:
                return c
        return None

    def _out_of_bounds(self, side: Side, row: Mapping[str, Any]) -> bool:
        for column in self._time_columns(side):
            floor = self.state.lower_bound(column)
            if floor is not None and row[column.name] < floor:
                return True
        return False

    def _true(self, predicate: Predicate, left: Mapping[str, Any] | None,
              right: Mapping[str, Any] | None, index: int) -> bool:
        try:
            return predicate(left, right) is True
        except EvaluationError as exc:
            raise InputRecordError(f"the join condition cannot be evaluated on this row: {exc}",
                                   index=index, field="row", source=SOURCE) from None

    def _null_padded(self, side: Side, row: Mapping[str, Any]) -> Item:
        self._counts["null_padded_rows_emitted"] += 1
        return _joined(row, None) if side == "left" else _joined(None, row)

    def _check_limit(self, side: Side, index: int) -> None:
        limit = self.spec.max_buffered_rows
        if limit is not None and self.state.buffered() >= limit:
            sizes = ", ".join(f"{s} buffer {len(self.state.buffers[s])}" for s in SIDES)
            raise StateLimitError(
                f"{OPERATOR}: record {index}: buffering a {side} row would exceed "
                f"max_buffered_rows={limit} ({sizes} rows); the watermarks do not evict rows "
                f"fast enough for this limit")

    def _on_row(self, side: Side, row: Mapping[str, Any], index: int) -> list[Item]:
        self._validate_row(side, row, index)
        self._counts["rows_received"] += 1
        late = self._late_column(side, row)
        if late is not None:
            if self.spec.late == "quarantine":
                self._counts["late_rows_quarantined"] += 1
                reason = late_reason(side, self.schema.watermark_name(late), row[late.name],
                                     self.state.last_received[late])
                return [{"quarantined": {"side": side, "row": dict(row)}, "reason": reason}]
            self._counts["late_rows_dropped"] += 1
            return []
        outer = side in self.spec.outer_sides
        prefilter = self.plan.filters.get(side)
        if prefilter is not None:
            args = (row, None) if side == "left" else (None, row)
            if not self._true(prefilter, *args, index):
                self._counts["rows_filtered"] += 1
                return [self._null_padded(side, row)] if outer else []

        entry = BufferedRow(dict(row))
        out_of_bounds = self._out_of_bounds(side, row)
        if out_of_bounds:
            self._counts["rows_out_of_bounds"] += 1
        else:
            self._check_limit(side, index)
            self.state.buffers[side].append(entry)
            self._counts["rows_buffered"] += 1

        out: list[Item] = []
        for other in self.state.buffers[other_side(side)]:
            left, right = (entry.row, other.row) if side == "left" else (other.row, entry.row)
            if self._true(self.plan.predicate, left, right, index):
                entry.unused = other.unused = False
                self._counts["joined_rows_emitted"] += 1
                out.append(_joined(left, right))
        if out_of_bounds and outer and entry.unused:
            out.append(self._null_padded(side, entry.row))
        return out

    # -- watermarks ------------------------------------------------------------------------------

    def _on_watermark(self, side: Side, name: str, ts: int, index: int) -> list[Item]:
        column = watermark_column(self.schema, side, name, index)
        self._counts["watermarks_received"] += 1
        if not self.state.receive_watermark(self.plan, column, ts):
            self._counts["stale_watermarks_ignored"] += 1
            return []
        out = self._evict() if self.plan.postpone_times.get(column) else []
        return out + self._emit_watermarks()

    def _evict(self) -> list[Item]:
        out: list[Item] = []
        for side in SIDES:
            floors = [(c.name, floor) for c in self._time_columns(side)
                      if (floor := self.state.lower_bound(c)) is not None]
            if not floors:
                continue
            kept: list[BufferedRow] = []
            for entry in self.state.buffers[side]:
                if any(entry.row[name] < floor for name, floor in floors):
                    self._counts["rows_evicted"] += 1
                    if entry.unused and side in self.spec.outer_sides:
                        out.append(self._null_padded(side, entry.row))
                else:
                    kept.append(entry)
            self.state.buffers[side] = kept
        return out

    def _min_buffered(self, column: ColumnRef) -> int | None:
        values = [e.row[column.name] for e in self.state.buffers[column.side]
                  if isinstance(e.row.get(column.name), int)]
        return min(values) if values else None

    def _emit_watermarks(self) -> list[Item]:
        if self.output_watermarks == "wm_state":
            emitted = self.state.emit_watermarks(self.schema, self._min_buffered)
        else:
            emitted = []
            for column in self.schema.ordered(self.state.watermarked):
                received = self.state.last_received.get(column)
                if received is None:
                    continue
                buffered = self._min_buffered(column)
                value = received if buffered is None else min(received, buffered)
                last = self.state.last_emitted.get(column)
                if last is None or value > last:
                    self.state.last_emitted[column] = value
                    emitted.append((column, value))
        self._counts["watermarks_emitted"] += len(emitted)
        return [{"watermark": {self.schema.watermark_name(c): v}} for c, v in emitted]


def restore(snapshot: Mapping[str, Any]) -> IntervalJoinProcessor:
    """Module-level alias of `IntervalJoinProcessor.restore`."""
    return IntervalJoinProcessor.restore(snapshot)
