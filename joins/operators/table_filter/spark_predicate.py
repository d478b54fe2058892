"""The filter's predicate as a Spark column: the verdict of `reference.evaluate` on a FIELD
struct (`joins.changelog.values`), so that both engines fail a predicate for the same reasons.

- a missing field fails whatever the op (`missing_field`);
- `lt` `le` `gt` `ge` compare two numbers or two strings, anything else fails
  (`incomparable`); strings compare by code point (Spark compares UTF-8 bytes: the same order);
- `eq` `ne` `in` `not_in` use JSON equality: numbers by value (1 == 1.0), true is not 1,
  objects and arrays member by member (their equality spelling holds numbers as floats).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from joins.changelog.forward import FAIL, INCOMPARABLE, MISSING_FIELD, PASS
from joins.changelog.values import equality_text
from joins.core.fields import is_number
from joins.operators.table_filter.spec import ORDERING_OPS, PredicateSpec

if TYPE_CHECKING:
    from pyspark.sql import Column

def json_equals(field: Column, operand: Any) -> Column:
    """JSON equality of the field and a constant."""
    from pyspark.sql import functions as F

    kind = field["kind"]
    if isinstance(operand, bool):
        return (kind == F.lit("bool")) & (field["text"] == F.lit("true" if operand else "false"))
    if is_number(operand):
        return kind.isin("int", "float") & (field["num"] == F.lit(float(operand)))
    if isinstance(operand, str):
        return (kind == F.lit("string")) & (field["text"] == F.lit(operand))
    if operand is None:
        return kind == F.lit("null")
    shape = "object" if isinstance(operand, dict) else "array"
    return (kind == F.lit(shape)) & (field["text"] == F.lit(equality_text(operand)))


def verdict(field: Column, predicate: PredicateSpec) -> Column:
    """pass | fail | missing_field | incomparable of a non-null value's field."""
    from pyspark.sql import functions as F

    op, operand = predicate.op, predicate.value
    kind = field["kind"]
    if op in ORDERING_OPS:
        if is_number(operand):
            comparable, subject, constant = kind.isin("int", "float"), field["num"], F.lit(float(operand))
        else:
            comparable, subject, constant = kind == F.lit("string"), field["text"], F.lit(operand)
        holds = {"lt": subject < constant, "le": subject <= constant,
                 "gt": subject > constant, "ge": subject >= constant}[op]
        decided = F.when(~comparable, F.lit(INCOMPARABLE)).when(holds, F.lit(PASS)).otherwise(F.lit(FAIL))
    else:
        if op in ("eq", "ne"):
            equal = json_equals(field, operand)
        else:
            equal = F.lit(False)
            for candidate in operand:
                equal = equal | json_equals(field, candidate)
        holds = equal if op in ("eq", "in") else ~equal
        decided = F.when(holds, F.lit(PASS)).otherwise(F.lit(FAIL))
    return F.when(kind == F.lit("missing"), F.lit(MISSING_FIELD)).otherwise(decided)
