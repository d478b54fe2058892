"""`python -m joins replay FILE --engine spark` for `table_filter` scenarios: the records land
batch by batch in a changelog table (`joins.changelog.replay`, the predicate's field landed as
a FIELD column) and the incremental filter runs each batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from joins.changelog.replay import land, loads, read_rows, replay_batches
from joins.changelog.values import JsonValues
from joins.core.operator import Item
from joins.operators.table_filter.reference import METRIC_NAMES
from joins.operators.table_filter.spec import TableFilterSpec, TableRecord


def item_of(row: Any) -> Item:
    return {"key": loads(row["key"]), "value": loads(row["value"]) if row["has_value"] else None,
            "old_value": loads(row["old_value"]) if row["has_old_value"] else None,
            "ts": row["ts"], "is_latest": row["is_latest"]}


class FilterReplay:
    """The changelog table of one replay and the filter's root, under `root`."""

    def __init__(self, spark: Any, spec: TableFilterSpec, root: str, *, create: bool = True) -> None:
        from joins.operators.table_filter.spark_incremental import TableFilterStep

        self.spark, self.spec = spark, spec
        self.source, self.join_root = f"{root}/table", f"{root}/filter"
        self.values = JsonValues(paths=(spec.predicate.field,))
        self.step = TableFilterStep(spec, self.values)
        if create:
            land(spark, self.source, [], create=True, values=self.values)

    def land(self, records: Sequence[TableRecord]) -> None:
        land(self.spark, self.source, records, values=self.values)

    def run(self, **kwargs: Any) -> Any:
        from joins import incremental

        return incremental.run_microbatch(self.spark, self.step, self.join_root,
                                          {"table": self.source}, **kwargs)

    def ordered_rows(self) -> list[tuple[int, int, Item]]:
        rows = read_rows(self.spark, f"{self.join_root}/output")
        return sorted(((r["_batch_id"], r["_emit_seq"], item_of(r)) for r in rows),
                      key=lambda t: (t[0], t[1]))


def spark_replay(spec: TableFilterSpec, records: Sequence[TableRecord], batch_size: int | None,
                 metrics: dict[str, int] | None = None) -> list[Item]:
    from joins.spark import get_spark

    return replay_batches(lambda tmp: FilterReplay(get_spark(), spec, tmp), records, batch_size,
                          counters=lambda r: {n: r.done.report.get(n, 0) for n in METRIC_NAMES},
                          names=METRIC_NAMES, metrics=metrics, prefix="tj-filter-replay-")
