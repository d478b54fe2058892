"""KTable#mapValues as a projection on the incremental runtime: the shared fold of KTable's
per-record operators (`joins.changelog.forward`), every value passing, over the input's changes
projected first, so that state and output hold only the mapped columns.

Two value models, as every table operator has (`joins.changelog.values`):
- typed columns (the lake): each output column is an input column, renamed;
- a replay's JSON text: the output value is the JSON object of the mapped fields, built from
  the landed FIELD columns (their canonical JSON; a missing field reads as null).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from joins.changelog import ChangelogColumns
from joins.changelog.forward import ForwardStep
from joins.changelog.values import JsonValues, TypedValues, field_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from joins.incremental import StepContext
    from joins.operators.table_map.spec import TableMapSpec

APP = "table_map"


@dataclass
class TableMapStep(ForwardStep):
    """`values`: the INPUT's value model (`TypedValues` of the mapped input columns, or the
    replay's `JsonValues` with one path per mapped field)."""

    spec: TableMapSpec
    values: JsonValues | TypedValues = field(default_factory=JsonValues)
    cols: ChangelogColumns = field(default_factory=ChangelogColumns)
    name: str = APP
    inputs: tuple[str, ...] = ("table",)

    counts: ClassVar[tuple[str, ...]] = ("expired", "out_of_order_forwarded")

    @property
    def _json(self) -> bool:
        return isinstance(self.values, JsonValues)

    def carried(self) -> tuple[str, ...]:
        return self.values.value_columns if self._json else self.spec.names

    def input_columns(self) -> tuple[str, ...]:
        if self._json:
            return ("value", *(field_column(n) for n in range(len(self.values.paths))))
        return tuple(dict.fromkeys(c.field for c in self.spec.columns))

    def value_type(self, schema: StructType) -> StructType:
        from pyspark.sql.types import StructField, StructType

        if self._json:
            return StructType([StructField("value", schema["value"].dataType, True)])
        return StructType([StructField(c.name, schema[c.field].dataType, True)
                           for c in self.spec.columns])

    def changes(self, ctx: StepContext) -> DataFrame:
        from joins.spark.exprs import ident, sql_string

        frame = ctx.changes("table")
        book = [ident(c) for c in self.cols.bookkeeping()]
        if not self._json:
            return frame.selectExpr(*book, *(f"{ident(c.field)} AS {ident(c.name)}"
                                             for c in self.spec.columns))
        members = []
        for column in self.spec.columns:
            slot = field_column(self.values.paths.index(column.field))
            members.append(f"{sql_string(json.dumps(column.name) + ':')}, coalesce({slot}.key, 'null')")
        obj = "concat('{', " + ", ',', ".join(members) + ", '}')"
        return frame.selectExpr(*book, f"CASE WHEN {ident(self.cols.tombstone)} THEN NULL "
                                       f"ELSE {obj} END AS value")
