"""KTable#filter on the incremental runtime (seed 002): the shared fold of KTable's per-record
operators (`joins.changelog.forward`) with the predicate as each new value's verdict. A value
that fails the predicate is forwarded as null; an unversioned input's null-to-null update is
dropped (`null_to_null_dropped`), a versioned input's is not (seed 002: downstream history
needs the tombstone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from joins.changelog import ChangelogColumns
from joins.changelog.forward import ALL_COUNTS, ForwardStep
from joins.changelog.values import JsonValues, TypedValues
from joins.operators.table_filter.spark_predicate import verdict

if TYPE_CHECKING:
    from pyspark.sql import Column

    from joins.operators.table_filter.spec import TableFilterSpec

APP = "table_filter"


@dataclass
class TableFilterStep(ForwardStep):
    spec: TableFilterSpec
    values: JsonValues | TypedValues = field(default_factory=JsonValues)
    cols: ChangelogColumns = field(default_factory=ChangelogColumns)
    name: str = APP
    inputs: tuple[str, ...] = ("table",)

    counts: ClassVar[tuple[str, ...]] = ALL_COUNTS
    drops_null_to_null: ClassVar[bool] = True

    def new_verdict(self) -> Column:
        predicate = self.spec.predicate
        return verdict(self.values.field(predicate.field), predicate)
