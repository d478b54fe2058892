"""`operator: table_filter` as a pipeline: KTable#filter over a changelog source (or another
pipeline's output), kept by micro-batches (`joins.changelog.pipeline`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import model_validator

from joins.changelog.pipeline import TableOperatorPipeline, value_types
from joins.incremental.projection import OutputValue
from joins.operators.table_filter.spec import PredicateSpec, TableFilterSpec

if TYPE_CHECKING:
    from joins.incremental import IncrementalOperator
    from joins.pipeline.spec import PipelineLayout


class TableFilterPipeline(TableOperatorPipeline):
    """`predicate`: `{field, op, value}` on a value column of the input (a top-level column:
    typed columns have no nested paths); plus the input settings of `TableOperatorPipeline`."""

    operator: Literal["table_filter"]
    predicate: PredicateSpec
    value_columns: tuple[str, ...] | None = None  # carried to the output (default: the source's)

    @model_validator(mode="after")
    def _predicate_on_a_column(self) -> TableFilterPipeline:
        field = self.predicate.field
        if field is None or "." in field:
            raise self.error("predicate.field", "name a value column of the input (typed columns "
                             "have no nested paths, and the whole value is no single column)")
        if self.source is not None and field not in self.source.value_names:
            raise self.error("predicate.field", f"{field!r} is not a value column of "
                             f"{self.source.name!r} (has {list(self.source.value_names)})")
        self.engine_spec()
        return self

    def engine_spec(self) -> TableFilterSpec:
        config: dict[str, Any] = {"predicate": self.predicate.model_dump(), "versioned": self.versioned}
        if self.history_retention_ms is not None:
            config["history_retention_ms"] = self.history_retention_ms
        return TableFilterSpec.model_validate(config)

    def columns_carried(self) -> tuple[str, ...]:
        if self.value_columns is not None:
            return self.value_columns
        if self.source is not None:
            return self.source.value_names
        return (str(self.predicate.field),)

    def output_values(self) -> tuple[OutputValue, ...]:
        return tuple(OutputValue(c, ("old_{}",)) for c in self.columns_carried())

    def step(self, layout: PipelineLayout) -> IncrementalOperator:
        from joins.changelog import ChangelogColumns
        from joins.changelog.values import TypedValues
        from joins.operators.table_filter.spark_incremental import TableFilterStep

        carried = self.columns_carried()
        types = value_types(layout, sorted({*carried, str(self.predicate.field)}))
        return TableFilterStep(self.engine_spec(), TypedValues(carried, types),
                               ChangelogColumns(key=self.key_column,
                                                seq="_seq" if self.source is not None else "_batch_id"))

    def summary(self) -> str:
        p = self.predicate
        return f"`{self.input_name()}` filtered by {p.field} {p.op} {p.value!r} (KTable#filter)."

    def settings(self) -> dict[str, Any]:
        return {"operator": self.operator, "predicate": f"{self.predicate.field} {self.predicate.op} "
                f"{self.predicate.value!r}", "versioned": self.versioned}
