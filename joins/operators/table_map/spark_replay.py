"""`python -m joins replay FILE --engine spark` for `table_map` scenarios: the records land
batch by batch in a changelog table (`joins.changelog.replay`, each mapped field landed as a
FIELD column) and the incremental map runs each batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from joins.changelog.replay import TableReplay, replay_table
from joins.changelog.values import JsonValues
from joins.core.operator import Item
from joins.core.versioned import TableRecord
from joins.operators.table_map.reference import METRIC_NAMES
from joins.operators.table_map.spec import TableMapSpec


class MapReplay(TableReplay):
    def __init__(self, spark: Any, spec: TableMapSpec, root: str, *, create: bool = True) -> None:
        from joins.operators.table_map.spark_incremental import TableMapStep

        values = JsonValues(paths=tuple(dict.fromkeys(c.field for c in spec.columns)))
        super().__init__(spark, spec, TableMapStep(spec, values), values, root, "map", create=create)


def spark_replay(spec: TableMapSpec, records: Sequence[TableRecord], batch_size: int | None,
                 metrics: dict[str, int] | None = None) -> list[Item]:
    return replay_table(lambda spark, tmp: MapReplay(spark, spec, tmp), records, batch_size,
                        metrics, names=METRIC_NAMES, prefix="tj-map-replay-")
