"""Configuration and input records of the `table_filter` operator (seed 002, KIP-914).

Config (see FORMAT.md):

- `predicate`: `{"field": optional path, "op": "eq|ne|lt|le|gt|ge|in|not_in", "value": JSON}`.
  `field` is a dotted path into the value (`"address.city"`); no field = the whole value. A field
  name that itself holds a dot cannot be addressed; arrays are not indexed. `in` / `not_in` take a
  list as `value`; `lt` / `le` / `gt` / `ge` take a number or a string.
- `versioned`: is the input table versioned (materialised as a versioned store upstream).
- `history_retention_ms`: the versioned input's history retention; required when `versioned` is
  true, refused when it is false (it would mean nothing).

Field paths and JSON equality live in `joins.core.fields`, the versioning rule in
`joins.core.versioned`. This module also holds the single-table input record that
`table_aggregate` shares.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import Field, model_validator

from joins.core.fields import FieldPath, is_number
from joins.core.versioned import TableRecord, VersionedInputSpec
from joins.errors import config_error
from joins.spec import Spec, parse_record

OPERATOR = "table_filter"

PredicateOp = Literal["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in"]
ORDERING_OPS: Final = frozenset({"lt", "le", "gt", "ge"})
MEMBERSHIP_OPS: Final = frozenset({"in", "not_in"})


class PredicateSpec(Spec):
    """`field op value`, evaluated on each new (and old) value of the input table."""

    field: FieldPath | None = None
    op: PredicateOp
    # Required even when null: `eq null` is a real predicate, a forgotten value is not.
    value: Any = Field(...)

    @model_validator(mode="after")
    def _value_fits_op(self) -> PredicateSpec:
        if self.op in MEMBERSHIP_OPS and not isinstance(self.value, list):
            raise config_error(OPERATOR, "predicate.value",
                               f"op {self.op!r} needs a list of values, got {self.value!r}")
        if self.op in ORDERING_OPS and not (is_number(self.value) or isinstance(self.value, str)):
            raise config_error(OPERATOR, "predicate.value",
                               f"op {self.op!r} compares numbers or strings, got {self.value!r}")
        return self


class TableFilterSpec(VersionedInputSpec):
    operator_name: ClassVar[str] = OPERATOR

    predicate: PredicateSpec


def parse_table_filter_record(raw: Any, index: int) -> TableRecord:
    return parse_record(TableRecord, raw, index=index, operator=OPERATOR)
