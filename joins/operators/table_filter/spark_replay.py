"""`python -m joins replay FILE --engine spark` for `table_filter` scenarios: the records land
batch by batch in a changelog table (`joins.changelog.replay`, the predicate's field landed as
a FIELD column) and the incremental filter runs each batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from joins.changelog.replay import TableReplay, replay_table
from joins.changelog.values import JsonValues
from joins.core.operator import Item
from joins.operators.table_filter.reference import METRIC_NAMES
from joins.operators.table_filter.spec import TableFilterSpec, TableRecord


class FilterReplay(TableReplay):
    def __init__(self, spark: Any, spec: TableFilterSpec, root: str, *, create: bool = True) -> None:
        from joins.operators.table_filter.spark_incremental import TableFilterStep

        values = JsonValues(paths=(spec.predicate.field,))
        super().__init__(spark, spec, TableFilterStep(spec, values), values, root, "filter",
                         create=create)


def spark_replay(spec: TableFilterSpec, records: Sequence[TableRecord], batch_size: int | None,
                 metrics: dict[str, int] | None = None) -> list[Item]:
    return replay_table(lambda spark, tmp: FilterReplay(spark, spec, tmp), records, batch_size,
                        metrics, names=METRIC_NAMES, prefix="tj-filter-replay-")
