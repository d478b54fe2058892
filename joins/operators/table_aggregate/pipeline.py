"""`operator: table_aggregate` as a pipeline: count, sum or concat of a changelog source's (or
another pipeline's output's) current values grouped by a column, kept by micro-batches
(`joins.changelog.pipeline`). The demo's `accounts_per_country` counts the customer-account
join's results per country."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import StrictStr, field_validator, model_validator

from joins.changelog.pipeline import TableOperatorPipeline, value_types
from joins.errors import ConfigError
from joins.incremental.projection import OutputValue
from joins.operators.table_aggregate.spec import AggregateSpec, TableAggregateSpec

if TYPE_CHECKING:
    from joins.incremental import IncrementalOperator
    from joins.pipeline.spec import PipelineLayout


_NUMBERS = ("long", "int", "double")


class TableAggregatePipeline(TableOperatorPipeline):
    """`group_by`: a value column of the input; `aggregate`: `count` | `{function: sum, field}`
    | `{function: concat, field}` (fields are value columns too)."""

    operator: Literal["table_aggregate"]
    group_by: StrictStr
    aggregate: AggregateSpec

    @field_validator("aggregate", mode="before")
    @classmethod
    def _shorthand(cls, aggregate: Any) -> Any:
        return {"function": aggregate} if isinstance(aggregate, str) else aggregate

    @model_validator(mode="after")
    def _columns(self) -> TableAggregatePipeline:
        for key, column in (("group_by", self.group_by), ("aggregate.field", self.aggregate.field)):
            if column is None:
                continue
            if "." in column:
                raise self.error(key, "name a value column of the input (typed columns have no "
                                 "nested paths)")
            if self.source is not None and column not in self.source.value_names:
                raise self.error(key, f"{column!r} is not a value column of {self.source.name!r} "
                                 f"(has {list(self.source.value_names)})")
        if self.aggregate.function == "concat" and self.aggregate.field is None:
            raise self.error("aggregate.field", "concat of a typed input names the column to concat")
        if self.aggregate.function == "sum" and self.source is not None:
            # A declared type says now what every row would say at the first micro-batch.
            declared = {c.name: c.type for c in self.source.value_columns}[self.aggregate.field or ""]
            if declared not in _NUMBERS:
                raise self.error("aggregate.field", f"sum needs a number column; "
                                 f"{self.aggregate.field!r} is declared {declared}")
        self.engine_spec()
        return self

    def engine_spec(self) -> TableAggregateSpec:
        config: dict[str, Any] = {"group_by": self.group_by,
                                  "aggregate": self.aggregate.model_dump(exclude_none=True),
                                  "versioned": self.versioned}
        if self.history_retention_ms is not None:
            config["history_retention_ms"] = self.history_retention_ms
        return TableAggregateSpec.model_validate(config)

    @property
    def output_key(self) -> str:
        return "key"

    def output_values(self) -> tuple[OutputValue, ...]:
        """The aggregate, named by its function (a sum's exact integer total follows it)."""
        function = self.aggregate.function
        return (OutputValue(function, ("{}_int",) if function == "sum" else ()),)

    def step(self, layout: PipelineLayout) -> IncrementalOperator:
        from pyspark.sql.types import NumericType

        from joins.changelog import ChangelogColumns
        from joins.changelog.values import TypedValues
        from joins.operators.table_aggregate.spark_incremental import TableAggregateStep

        columns = tuple(c for c in (self.group_by, self.aggregate.field) if c is not None)
        types = value_types(layout, columns)
        field = self.aggregate.field
        if self.aggregate.function == "sum" and field and not isinstance(types[field], NumericType):
            # An upstream pipeline's output declares no types: its table's schema tells them.
            raise ConfigError(f"{self.name}: sum needs a number column; {field!r} of "
                              f"{self.input_name()!r} is {types[field].simpleString()}")
        return TableAggregateStep(
            self.engine_spec(), TypedValues(columns, types),
            ChangelogColumns(key=self.key_column, seq="_seq" if self.source is not None else "_batch_id"),
            json_keys=False)

    def summary(self) -> str:
        what = self.aggregate.function + (f" of {self.aggregate.field}" if self.aggregate.field else "")
        return f"{what} of `{self.input_name()}` per {self.group_by} (KGroupedTable aggregation)."

    def settings(self) -> dict[str, Any]:
        return {"operator": self.operator, "group_by": self.group_by,
                "aggregate": self.aggregate.function, "versioned": self.versioned}
