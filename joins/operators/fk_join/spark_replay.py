"""`python -m joins replay FILE --engine spark` for `fk_join` scenarios.

The scenario's records are cut into micro-batches in arrival order; each batch's left and
right records are appended to two changelog tables (`joins.changelog.replay`: keys as key
text, values as canonical JSON, the record's index as its arrival order, so both sides
interleave as in the reference engine). The left table also holds the foreign key, read from
each value by `FkJoinSpec.extract_foreign_key` (what an ingest with a declared foreign-key
column stores; a malformed value is refused there, naming the record). `run_microbatch` runs
each batch; the output comes back in emission order: by batch, then by the arrival index of
the update whose response emitted the row, then, for one right update's fan-out, by key (the
subscription store's prefix scan order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.changelog.replay import (
    CHANGELOG_SCHEMA,
    TwoTableReplay,
    loads,
    read_rows,
    replay_batches,
    value_text,
)
from joins.core.keys import key_text
from joins.core.operator import Item
from joins.operators.fk_join.columns import BATCH_ID, EMIT_SEQ, SIDES, has
from joins.operators.fk_join.spec import FkJoinRecord, FkJoinSpec

if TYPE_CHECKING:

    from joins.operators.fk_join.report import FkJoinReport

LEFT_SCHEMA = CHANGELOG_SCHEMA + ", fk string"
# The reference's counters that mean the same on both engines (the protocol's traffic,
# stale responses included, depends on how many messages are in flight at once: see
# docs/fk_join.md).
COMPARABLE = ("out_of_order_ignored", "expired", "null_foreign_key_skipped")


def left_row(spec: FkJoinSpec, r: FkJoinRecord) -> tuple[Any, ...]:
    """A left record as a changelog row with its foreign key (LEFT_SCHEMA)."""
    fk = None if r.value is None else spec.extract_foreign_key(r.value, index=r.i)
    return (key_text(r.key), value_text(r.value), r.ts, r.value is None, r.i, key_text(fk))


class ReplayLake(TwoTableReplay):
    """The changelog tables of one replay and the join's root, under `root`; the left table
    carries each value's foreign key."""

    def create(self) -> None:
        for side in SIDES:
            self._append(side, [])

    def _append(self, side: str, records: Sequence[FkJoinRecord]) -> None:
        if side == "left":
            rows = [left_row(self.spec, r) for r in records]
        else:
            rows = [(key_text(r.key), value_text(r.value), r.ts, r.value is None, r.i)
                    for r in records]
        schema = LEFT_SCHEMA if side == "left" else CHANGELOG_SCHEMA
        lake.append_rows(self.spark, self.sources[side], rows, schema)

    def land(self, records: Sequence[FkJoinRecord]) -> None:
        for side in SIDES:
            mine = [r for r in records if r.side == side]
            if mine:
                self._append(side, mine)

    def microbatch(self) -> Any:
        from joins.operators.fk_join.spark_incremental import run_microbatch

        return run_microbatch

    def ordered_rows(self) -> list[tuple[int, int, str, Item]]:
        """(batch id, emitted after, key text, item) of every output row, in emission order."""
        out = []
        for row in read_rows(self.spark, f"{self.join_root}/output"):
            value = None if row["tombstone"] else [
                loads(row["left_value"]), loads(row["right_value"]) if row[has("right")] else None]
            out.append((row[BATCH_ID], row[EMIT_SEQ], row["key"],
                        {"key": loads(row["key"]), "value": value, "ts": row["ts"]}))
        return sorted(out, key=lambda t: (t[0], t[1], t[2]))


COUNTERS = ("out_of_order_ignored", "expired", "null_foreign_key_skipped", "stale_response_discarded")


def batch_counters(report: FkJoinReport) -> dict[str, int]:
    """A batch's share of the reference's counters."""
    return {"out_of_order_ignored": sum(report.out_of_order_ignored.values()),
            "expired": sum(report.expired.values()),
            "null_foreign_key_skipped": report.null_foreign_key_skipped,
            "stale_response_discarded": report.stale_discarded}


def counters_of(reports: Sequence[FkJoinReport]) -> dict[str, int]:
    """The reference's counters, summed over the batches' reports."""
    return {name: sum(batch_counters(r)[name] for r in reports) for name in COUNTERS}


def spark_replay(spec: FkJoinSpec, records: Sequence[FkJoinRecord], batch_size: int | None,
                 metrics: dict[str, int] | None = None) -> list[Item]:
    """Replay `records` through `run_microbatch`, `batch_size` records a batch (None: one
    batch); items carry `after_input` = the last input index of their batch."""
    from joins.spark import get_spark

    return replay_batches(lambda tmp: ReplayLake(get_spark(), spec, tmp), records, batch_size,
                          counters=batch_counters, names=COUNTERS, metrics=metrics,
                          prefix="tj-fk-replay-")
