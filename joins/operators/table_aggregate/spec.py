"""Configuration and input records of the `table_aggregate` operator (seed 002, KIP-914).

Config (see FORMAT.md):

- `group_by`: `"value"` groups by the whole value; anything else is a dotted path into the value
  (`"address.city"`), as `table_filter`'s predicate field. `"value"` always means the whole
  value, so a top-level field literally named `value` cannot be grouped on.
- `aggregate`: `{"function": "count"}`, `{"function": "sum", "field": path}` (the field is
  required) or `{"function": "concat", "field": optional path}` (no field = the whole value).
  The bare strings `"count"` and `"concat"` are shorthands for the objects without a field.
- `versioned`, `history_retention_ms`: the input table's versioning, as for `table_filter`.

Input: `{"i", "key", "value", "ts"}`, as `table_filter`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, StrictStr, field_validator, model_validator

from joins.core.fields import FieldPath
from joins.core.versioned import TableRecord, VersionedInputSpec
from joins.errors import config_error
from joins.spec import Spec, parse_record

OPERATOR = "table_aggregate"

# `group_by` naming the whole value rather than a field of it.
WHOLE_VALUE = "value"

AggregateFunction = Literal["count", "sum", "concat"]


class AggregateSpec(Spec):
    function: AggregateFunction
    field: FieldPath | None = None

    @model_validator(mode="after")
    def _field_fits_function(self) -> AggregateSpec:
        if self.function == "sum" and self.field is None:
            raise config_error(OPERATOR, "aggregate.field",
                               "required for sum (the numeric field of the value to add up)")
        if self.function == "count" and self.field is not None:
            raise config_error(OPERATOR, "aggregate.field",
                               "count counts the group's members and takes no field; remove it")
        return self


class TableAggregateSpec(VersionedInputSpec):
    operator_name: ClassVar[str] = OPERATOR

    group_by: StrictStr = Field(min_length=1)
    aggregate: AggregateSpec

    @field_validator("group_by")
    @classmethod
    def _group_by_is_path(cls, group_by: str) -> str:
        if group_by != WHOLE_VALUE and any(part == "" for part in group_by.split(".")):
            raise ValueError(f"'value' or a field path (names joined by '.'), got {group_by!r}")
        return group_by

    @field_validator("aggregate", mode="before")
    @classmethod
    def _shorthand(cls, aggregate: Any) -> Any:
        # "count" / "concat" read as {"function": ...}; "sum" then fails for want of a field.
        if isinstance(aggregate, str):
            return {"function": aggregate}
        return aggregate

    @property
    def group_path(self) -> str | None:
        """The dotted path of the group key in the value, None for the whole value."""
        return None if self.group_by == WHOLE_VALUE else self.group_by


def parse_table_aggregate_record(raw: Any, index: int) -> TableRecord:
    return parse_record(TableRecord, raw, index=index, operator=OPERATOR)
