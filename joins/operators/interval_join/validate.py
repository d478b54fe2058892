"""Checks of an input record against the config and the watermarks received so far, one wording
for every engine (the reference processor and the Spark replay, which lands only valid rows)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from joins.errors import InputRecordError
from joins.operators.interval_join.spec import OPERATOR
from joins.sql import ColumnRef, JoinConditionPlan, Schema, Side

SOURCE = f"{OPERATOR} input"

def validate_row(plan: JoinConditionPlan, watermarked: Iterable[ColumnRef], side: Side,
                 row: Mapping[str, Any], index: int) -> None:
    """A row's columns must be its side's, and each watermarked column (every column of a time
    bound, and any column a watermark named) an integer: InputRecordError naming the field."""
    schema = plan.schema
    columns = schema.columns(side)
    for key in row:
        if key not in columns:
            raise InputRecordError(f"unknown column of the {side} input ({side}_columns: "
                                   f"{list(columns)})", index=index, field=f"row.{key}",
                                   record=row, source=SOURCE)
    for ref in schema.ordered(c for c in watermarked if c.side == side):
        why = _why_time_column(plan, ref)
        if ref.name not in row:
            raise InputRecordError(f"missing time column: every {side} row needs an integer "
                                   f"(milliseconds) here ({why})",
                                   index=index, field=f"row.{ref.name}", record=row, source=SOURCE)
        value = row[ref.name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise InputRecordError(f"time column must be an integer (milliseconds), got {value!r} "
                                   f"({why})", index=index, field=f"row.{ref.name}", record=row,
                                   source=SOURCE)


def watermark_column(schema: Schema, side: Side, name: str, index: int) -> ColumnRef:
    """The column a watermark record names, or InputRecordError naming the record."""
    column = schema.watermark_column(side, name)
    if column is None:
        raise InputRecordError(f"unknown column of the {side} input ({side}_columns: "
                               f"{list(schema.columns(side))})",
                               index=index, field=f"watermark.{name}", source=SOURCE)
    return column


def _why_time_column(plan: JoinConditionPlan, ref: ColumnRef) -> str:
    for bound in plan.bounds:
        if ref in (bound.bounded, bound.reference):
            return f"it is in the time bound `{bound.source}`"
    return "a watermark of this column was received"
