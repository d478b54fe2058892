"""Configuration of the `table_map` operator: KTable#mapValues as a projection of the value,
with renames (seed 002's versioning rules; Kafka Streams' `KTableMapValues`).

Config (see FORMAT.md):

- `columns`: what each output value holds, in order: `{"field": path, "as": name}` or just the
  path (`"amount"`, named by its last segment). `field` is a dotted path into the input value
  (`"address.city"`); `as` names the output field. Names must be distinct.
- `versioned` / `history_retention_ms`: the input table's materialisation, as for `table_filter`.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, StrictStr, field_validator, model_validator

from joins.core.fields import FieldPath
from joins.core.versioned import TableRecord, VersionedInputSpec
from joins.errors import config_error
from joins.spec import Spec, parse_record

OPERATOR = "table_map"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MappedColumn(Spec):
    """One field of the output value: the input's `field`, named `as`."""

    field: FieldPath
    as_: StrictStr | None = Field(default=None, alias="as")

    @property
    def name(self) -> str:
        return self.as_ if self.as_ is not None else self.field.rsplit(".", 1)[-1]


def columns_shorthand(raw: Any) -> Any:
    """A bare path stands for `{field: path}`: `columns: [amount, status]` is the common case."""
    if isinstance(raw, list | tuple):
        return [{"field": c} if isinstance(c, str) else c for c in raw]
    return raw


class TableMapSpec(VersionedInputSpec):
    operator_name: ClassVar[str] = OPERATOR

    columns: tuple[MappedColumn, ...] = Field(min_length=1)

    _shorthand = field_validator("columns", mode="before")(classmethod(
        lambda cls, raw: columns_shorthand(raw)))

    @model_validator(mode="after")
    def _distinct_names(self) -> TableMapSpec:
        seen: set[str] = set()
        for n, column in enumerate(self.columns):
            if not _NAME.match(column.name):
                raise config_error(OPERATOR, f"columns.{n}.as", f"{column.name!r} is not a column "
                                   f"name (letters, digits and _, not starting with a digit)")
            if column.name in seen:
                raise config_error(OPERATOR, f"columns.{n}", f"two output columns are named "
                                   f"{column.name!r}; give one of them another `as`")
            seen.add(column.name)
        return self

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def parse_table_map_record(raw: Any, index: int) -> TableRecord:
    return parse_record(TableRecord, raw, index=index, operator=OPERATOR)
