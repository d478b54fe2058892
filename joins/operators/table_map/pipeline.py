"""`operator: table_map` as a pipeline: KTable#mapValues as a projection with renames, over a
changelog source (or another pipeline's output), kept by micro-batches (`joins.changelog.pipeline`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import field_validator, model_validator

from joins.changelog.pipeline import RESERVED, TableOperatorPipeline, value_types
from joins.incremental.projection import OutputValue
from joins.operators.table_map.spec import MappedColumn, TableMapSpec, columns_shorthand

if TYPE_CHECKING:
    from joins.incremental import IncrementalOperator
    from joins.pipeline.spec import PipelineLayout


class TableMapPipeline(TableOperatorPipeline):
    """`columns`: the input's value columns the output keeps, each a name or `{field, as}` (a
    rename); plus the input settings of `TableOperatorPipeline`."""

    operator: Literal["table_map"]
    columns: tuple[MappedColumn, ...]

    _shorthand = field_validator("columns", mode="before")(classmethod(
        lambda cls, raw: columns_shorthand(raw)))

    @model_validator(mode="after")
    def _columns_of_the_input(self) -> TableMapPipeline:
        for n, column in enumerate(self.columns):
            if "." in column.field:
                raise self.error(f"columns.{n}.field", "name a value column of the input (typed "
                                 "columns have no nested paths)")
            if self.source is not None and column.field not in self.source.value_names:
                raise self.error(f"columns.{n}.field", f"{column.field!r} is not a value column "
                                 f"of {self.source.name!r} (has {list(self.source.value_names)})")
        if self.select is not None:
            raise self.error("select", "the map's `columns` are its projection: list and rename "
                             "the columns there")
        names = {c.name for c in self.columns}
        for n, column in enumerate(self.columns):
            clash = (column.name in RESERVED or column.name == self.key_column
                     or (column.name.startswith("old_") and column.name[4:] in names))
            if clash:
                raise self.error(f"columns.{n}.as", f"{column.name!r} is a column the operator "
                                 f"writes itself (the key, {', '.join(sorted(RESERVED))} and "
                                 f"old_<column>); choose another name")
        self.engine_spec()
        return self

    def output_values(self) -> tuple[OutputValue, ...]:
        return tuple(OutputValue(c.name, ("old_{}",)) for c in self.columns)

    def engine_spec(self) -> TableMapSpec:
        config: dict[str, Any] = {"versioned": self.versioned,
                                  "columns": [{"field": c.field, "as": c.name} for c in self.columns]}
        if self.history_retention_ms is not None:
            config["history_retention_ms"] = self.history_retention_ms
        return TableMapSpec.model_validate(config)

    def step(self, layout: PipelineLayout) -> IncrementalOperator:
        from joins.changelog import ChangelogColumns
        from joins.changelog.values import TypedValues
        from joins.operators.table_map.spark_incremental import TableMapStep

        fields = tuple(dict.fromkeys(c.field for c in self.columns))
        return TableMapStep(self.engine_spec(), TypedValues(fields, value_types(layout, fields)),
                            ChangelogColumns(key=self.key_column,
                                             seq="_seq" if self.source is not None else "_batch_id"))

    def summary(self) -> str:
        shown = ", ".join(c.field if c.name == c.field else f"{c.field} AS {c.name}"
                          for c in self.columns)
        return f"`{self.input_name()}` mapped to {shown} (KTable#mapValues)."

    def settings(self) -> dict[str, Any]:
        return {"operator": self.operator, "versioned": self.versioned,
                "columns": ", ".join(c.field if c.name == c.field else f"{c.field} AS {c.name}"
                                     for c in self.columns)}
