"""`python -m joins replay FILE --engine spark` for `table_table_join` scenarios.

The scenario's records are cut into micro-batches in arrival order; each batch's left and
right records are appended to two changelog tables (`joins.changelog.replay`: the record's
index is its arrival order, so both sides interleave as in the reference engine) and
`run_microbatch` runs the batch. The output rows come back in emission order: by batch, then
by the arrival index of the update that emitted the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from joins.changelog.replay import TwoTableReplay, land, loads, read_rows, replay_batches
from joins.core.operator import Item
from joins.operators.table_table_join.columns import BATCH_ID, EMIT_SEQ, SIDES, has
from joins.operators.table_table_join.reference import METRIC_NAMES
from joins.operators.table_table_join.spec import TableTableJoinRecord, TableTableJoinSpec

if TYPE_CHECKING:

    from joins.operators.table_table_join.report import TableTableReport


class ReplayLake(TwoTableReplay):
    """The changelog tables of one replay and the join's root, under `root`."""

    def land(self, records: Sequence[TableTableJoinRecord]) -> None:
        for side in SIDES:
            land(self.spark, self.sources[side], [r for r in records if r.side == side])

    def microbatch(self) -> Any:
        from joins.operators.table_table_join.spark_incremental import run_microbatch

        return run_microbatch

    def ordered_rows(self) -> list[tuple[int, int, Item]]:
        """(batch id, emitted after, item) of every output row, in emission order."""
        rows = read_rows(self.spark, f"{self.join_root}/output")
        out = []
        for row in rows:
            value = None if row["tombstone"] else [
                loads(row["left_value"]) if row[has("left")] else None,
                loads(row["right_value"]) if row[has("right")] else None]
            out.append((row[BATCH_ID], row[EMIT_SEQ],
                        {"key": loads(row["key"]), "value": value, "ts": row["ts"]}))
        return sorted(out, key=lambda t: (t[0], t[1]))


def spark_replay(spec: TableTableJoinSpec, records: Sequence[TableTableJoinRecord],
                 batch_size: int | None, metrics: dict[str, int] | None = None) -> list[Item]:
    """Replay `records` through `run_microbatch`, `batch_size` records a batch (None: one
    batch); items carry `after_input` = the last input index of their batch."""
    from joins.spark import get_spark

    def counters(report: TableTableReport) -> dict[str, int]:
        return {"out_of_order_ignored": sum(report.out_of_order_ignored.values()),
                "expired": sum(report.expired.values())}

    return replay_batches(lambda tmp: ReplayLake(get_spark(), spec, tmp), records, batch_size,
                          counters=counters, names=METRIC_NAMES, metrics=metrics,
                          prefix="tj-ttj-replay-")
