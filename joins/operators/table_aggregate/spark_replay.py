"""`python -m joins replay FILE --engine spark` for `table_aggregate` scenarios: the records land
batch by batch in a changelog table (`joins.changelog.replay`, the group_by and aggregate fields
landed as FIELD columns) and the incremental aggregate runs each batch. A value the aggregate
cannot use fails the batch inside Spark; the replay hands the reference's message on as an
InputRecordError."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from joins.changelog.replay import land, loads, read_rows, replay_batches
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


class AggregateReplay:
    """The changelog table of one replay and the aggregate's root, under `root`."""

    def __init__(self, spark: Any, spec: TableAggregateSpec, root: str, *, create: bool = True) -> None:
        from joins.operators.table_aggregate.spark_incremental import TableAggregateStep

        self.spark, self.spec = spark, spec
        self.source, self.join_root = f"{root}/table", f"{root}/aggregate"
        self.values = JsonValues(paths=(spec.group_path, spec.aggregate.field))
        self.step = TableAggregateStep(spec, self.values)
        if create:
            land(spark, self.source, [], create=True, values=self.values)

    def land(self, records: Sequence[TableRecord]) -> None:
        land(self.spark, self.source, records, values=self.values)

    def run(self, **kwargs: Any) -> Any:
        from joins import incremental

        try:
            return incremental.run_microbatch(self.spark, self.step, self.join_root,
                                              {"table": self.source}, **kwargs)
        except Exception as exc:
            found = _BAD.search(str(exc))
            if found is None:
                raise
            raise InputRecordError(found.group(3), index=int(found.group(1)), field=found.group(2),
                                   source=f"{OPERATOR} input") from None

    def ordered_rows(self) -> list[tuple[int, int, int, Item]]:
        rows = read_rows(self.spark, f"{self.join_root}/output")
        function = self.spec.aggregate.function
        return sorted(((r["_batch_id"], r["_emit_seq"], r["_emit_role"], item_of(r, function))
                       for r in rows), key=lambda t: (t[0], t[1], t[2]))


def spark_replay(spec: TableAggregateSpec, records: Sequence[TableRecord], batch_size: int | None,
                 metrics: dict[str, int] | None = None) -> list[Item]:
    from joins.spark import get_spark

    return replay_batches(lambda tmp: AggregateReplay(get_spark(), spec, tmp), records, batch_size,
                          counters=lambda r: {n: r.done.report.get(n, 0) for n in METRIC_NAMES},
                          names=METRIC_NAMES, metrics=metrics, prefix="tj-aggregate-replay-")
