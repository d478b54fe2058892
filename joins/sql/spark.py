"""Compile a join condition into a Spark Column, with the semantics of `evaluator.py`.

The reference evaluates JSON values and finds type errors per row; Spark columns have one type,
so the same rules are decided when the condition is compiled, from each column's kind:

- kinds: `long`, `double`, `string`, `boolean`, and `json` (a column whose values mix JSON types,
  stored as canonical JSON text, `joins.core.keys.key_text`): a `json` column may only be
  compared as a key (`l.k = r.k`) or tested with IS [NOT] NULL;
- ordering (`< <= > >=`, BETWEEN) takes two numbers, two strings or two booleans: anything else
  is a ConfigError naming the comparison (the reference's per-row EvaluationError, earlier);
- a bare column equality is THE key rule (`joins.core.keys`): columns of different kinds never
  match (1 and 1.0, 1 and "1"), NULL with a NULL operand; any other equality compares JSON
  values (numbers by value, other kinds never equal);
- SQL three-valued logic is Spark's own; integer division truncates toward zero, `%` takes the
  dividend's sign, and a division by zero fails the query (the reference's EvaluationError)
  instead of Spark's silent NULL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from sqlglot import exp

from joins.errors import ConfigError
from joins.sql.columns import ColumnRef
from joins.sql.evaluator import SUPPORTED, ColumnResolve, interval_ms, number_literal
from joins.sql.time_bounds import unparen

if TYPE_CHECKING:
    from pyspark.sql import Column

Kind = Literal["long", "double", "string", "boolean", "json", "null"]
NUMERIC: frozenset[str] = frozenset({"long", "double"})
# A column of one input: its Spark expression and kind.
ColumnOf = Callable[[ColumnRef], tuple["Column", Kind]]

_ORDERINGS = {exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}


def _error(node: exp.Expression, message: str) -> ConfigError:
    return ConfigError(f"condition: {node.sql()!r}: {message}")


class _SparkCompiler:
    def __init__(self, resolve: ColumnResolve, column_of: ColumnOf) -> None:
        self.resolve = resolve
        self.column_of = column_of

    def compile(self, node: exp.Expression) -> tuple[Column, Kind]:
        from pyspark.sql import functions as F

        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            return self.column_of(self.resolve(node))
        if isinstance(node, exp.Literal):
            if node.is_string:
                return F.lit(node.this), "string"
            value = number_literal(node)
            return F.lit(value), "long" if isinstance(value, int) else "double"
        if isinstance(node, exp.Boolean):
            return F.lit(bool(node.this)), "boolean"
        if isinstance(node, exp.Null):
            return F.lit(None), "null"
        if isinstance(node, exp.Interval):
            return F.lit(interval_ms(node)), "long"
        if isinstance(node, exp.Neg):
            inner, kind = self.compile(node.this)
            self._numeric(node, kind)
            return -inner, kind
        if type(node) in _ARITHMETIC:
            return self._arithmetic(node)
        if type(node) in _ORDERINGS:
            a, b = self._comparable(node, node.this, node.expression)
            return _ORDER_FN[_ORDERINGS[type(node)]](a, b), "boolean"
        if isinstance(node, exp.EQ | exp.NEQ):
            equal = self._equality(node)
            return (equal if isinstance(node, exp.EQ) else ~equal), "boolean"
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            v, low = self._comparable(node, node.this, node.args["low"])
            v2, high = self._comparable(node, node.this, node.args["high"])
            return (v >= low) & (v2 <= high), "boolean"
        if isinstance(node, exp.And):
            return self._boolean(node.this) & self._boolean(node.expression), "boolean"
        if isinstance(node, exp.Not):
            return ~self._boolean(node.this), "boolean"
        if isinstance(node, exp.Is):
            return self._is(node), "boolean"
        raise ConfigError(f"condition: unsupported SQL {node.sql()!r} ({type(node).__name__}); "
                          f"supported: {SUPPORTED}")

    def _numeric(self, node: exp.Expression, *kinds: Kind) -> None:
        for kind in kinds:
            if kind not in NUMERIC and kind != "null":
                raise _error(node, f"needs numbers, got a {kind} operand")

    def _arithmetic(self, node: exp.Expression) -> tuple[Column, Kind]:
        from pyspark.sql import functions as F

        (a, ka), (b, kb) = self.compile(node.this), self.compile(node.expression)
        self._numeric(node, ka, kb)
        kind: Kind = "long" if {ka, kb} <= {"long", "null"} else "double"
        op = _ARITHMETIC[type(node)]
        if op in "+-*":
            return {"+": a + b, "-": a - b, "*": a * b}[op], kind
        zero = F.raise_error(F.lit(f"condition: division by zero in {node.sql()!r}"))
        if op == "%":
            result = a % b
        elif kind == "long":
            # Truncation toward zero (SQL), exact for longs: (a - a % b) is a multiple of b.
            result = ((a - a % b) / b).cast("long")
        else:
            result = a / b
        return F.when(b == F.lit(0), zero).otherwise(result), kind

    def _comparable(self, node: exp.Expression, x: exp.Expression,
                    y: exp.Expression) -> tuple[Column, Column]:
        (a, ka), (b, kb) = self.compile(x), self.compile(y)
        if "json" in (ka, kb):
            raise _error(node, "a column holding values of several JSON types can only be "
                               "compared as a key (l.k = r.k) or tested with IS NULL")
        kinds = {ka, kb} - {"null"}
        if not (kinds <= NUMERIC or len(kinds) <= 1):
            raise _error(node, f"cannot compare a {ka} with a {kb} (different types)")
        return a, b

    def _equality(self, node: exp.Expression) -> Column:
        from pyspark.sql import functions as F

        x, y = node.this, node.expression
        (a, ka), (b, kb) = self.compile(x), self.compile(y)
        as_keys = isinstance(unparen(x), exp.Column) and isinstance(unparen(y), exp.Column)
        if not as_keys and "json" in (ka, kb):
            raise _error(node, "a column holding values of several JSON types can only be "
                               "compared as a key (l.k = r.k) or tested with IS NULL")
        same = ka == kb or "null" in (ka, kb) or (not as_keys and {ka, kb} <= NUMERIC)
        if same:
            return a == b
        # Different JSON types: never equal, but still NULL when an operand is NULL.
        return F.when(a.isNull() | b.isNull(), F.lit(None).cast("boolean")).otherwise(F.lit(False))

    def _boolean(self, node: exp.Expression) -> Column:
        column, kind = self.compile(node)
        if kind not in ("boolean", "null"):
            raise _error(node, f"needs a boolean, got a {kind}")
        return column

    def _is(self, node: exp.Is) -> Column:
        target = node.expression
        if isinstance(target, exp.Null):
            return self.compile(node.this)[0].isNull()
        if isinstance(target, exp.Boolean):
            return self._boolean(node.this).eqNullSafe(bool(target.this))
        raise ConfigError(f"condition: unsupported SQL {node.sql()!r}; IS takes NULL, TRUE or FALSE")


_ORDER_FN: dict[str, Callable[[Column, Column], Column]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def compile_spark(node: exp.Expression, resolve: ColumnResolve, column_of: ColumnOf) -> Column:
    """The condition (or a filter conjunct) as a boolean Spark Column (NULL: not TRUE)."""
    column, kind = _SparkCompiler(resolve, column_of).compile(node)
    if kind not in ("boolean", "null"):
        raise _error(node, f"a condition must be a boolean, got a {kind}")
    return column


def spark_kind(type_name: str) -> Kind:
    """The kind of a Spark column type (`simpleString`), or ConfigError for other types."""
    if type_name in ("bigint", "int", "smallint", "tinyint"):
        return "long"
    if type_name in ("double", "float") or type_name.startswith("decimal"):
        return "double"
    if type_name in ("string", "boolean"):
        return type_name  # type: ignore[return-value]
    raise ConfigError(f"condition: columns of type {type_name} cannot be used in a join condition "
                      f"(numbers, strings and booleans can)")
