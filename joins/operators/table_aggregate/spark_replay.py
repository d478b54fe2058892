"""`python -m joins replay FILE --engine spark` for `table_aggregate` scenarios: the records land
batch by batch in a changelog table (`joins.changelog.replay`, the group_by and aggregate fields
landed as FIELD columns) and the incremental aggregate runs each batch. A value the aggregate
cannot use fails the batch inside Spark; the replay hands the reference's message on as an
InputRecordError."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from joins.changelog.replay import TableReplay, loads, replay_table
from joins.changelog.values import JsonValues
from joins.core.operator import Item
from joins.core.versioned import TableRecord
from joins.errors import InputRecordError
from joins.operators.table_aggregate.reference import METRIC_NAMES
from joins.operators.table_aggregate.spec import OPERATOR, TableAggregateSpec

_BAD = re.compile(re.escape(OPERATOR) + r" input, record (\d+), field '([^']*)': ([^\n]*?)(?: SQLSTATE|\n|$)")


def item_of(row: Any, function: str) -> Item:
    if row["tombstone"]:
        value = None
    elif function == "sum":
        value = row["sum_int"] if row["sum_int"] is not None else row["sum"]
    else:
        value = row[function]
    return {"key": loads(row["key"]), "value": value, "ts": row["ts"]}


class AggregateReplay(TableReplay):
    def __init__(self, spark: Any, spec: TableAggregateSpec, root: str, *, create: bool = True) -> None:
        from joins.operators.table_aggregate.spark_incremental import TableAggregateStep

        values = JsonValues(paths=(spec.group_path, spec.aggregate.field))
        super().__init__(spark, spec, TableAggregateStep(spec, values), values, root, "aggregate",
                         create=create)

    def run(self, **kwargs: Any) -> Any:
        try:
            return super().run(**kwargs)
        except Exception as exc:
            found = _BAD.search(str(exc))
            if found is None:
                raise
            raise InputRecordError(found.group(3), index=int(found.group(1)), field=found.group(2),
                                   source=f"{OPERATOR} input") from None

    def row_of(self, row: Any) -> tuple[Any, ...]:
        return (row["_batch_id"], row["_emit_seq"], row["_emit_role"],
                item_of(row, self.spec.aggregate.function))


def spark_replay(spec: TableAggregateSpec, records: Sequence[TableRecord], batch_size: int | None,
                 metrics: dict[str, int] | None = None) -> list[Item]:
    return replay_table(lambda spark, tmp: AggregateReplay(spark, spec, tmp), records, batch_size,
                        metrics, names=METRIC_NAMES, prefix="tj-aggregate-replay-")
