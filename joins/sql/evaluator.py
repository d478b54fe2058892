"""Compile a join condition (a sqlglot expression) into a Python predicate over (left, right) rows.

Supported: column references, number / string / boolean / NULL literals, INTERVAL literals (as
milliseconds), unary minus, `+ - * / %`, `= <> != < <= > >=`, BETWEEN, AND, NOT, IS [NOT] NULL,
IS [NOT] TRUE/FALSE and parentheses. Anything else is a ConfigError naming the fragment.

SQL three-valued logic: NULL (a JSON null or an absent column) compared with anything is NULL,
NULL AND FALSE is FALSE, NULL AND TRUE is NULL, NOT NULL is NULL; a row pair joins only when the
condition is TRUE. Integer division truncates toward zero and `%` takes the dividend's sign
(SQL's rules, not Python's).

Equality (`=`, `<>`) never fails. Two columns compared as they are (`l.k = r.k`, an equi-join key)
follow THE key rule of `joins.core.keys`: equal iff equal by value and JSON type, so 1 and "1",
1 and 1.0, true and 1 never match, and objects compare member by member. An operand computed by
arithmetic or written as a literal compares as a JSON value (`joins.core.fields.json_equal`):
numbers by value (`l.price = 10.0` holds for 10), values of different types never equal.
Ordering (`< <= > >=`, BETWEEN, and so every time bound) compares two numbers or two strings
(or two booleans); ordering values of other types, or dividing by zero, is an EvaluationError
rather than a silent FALSE.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from sqlglot import exp

from joins.core.fields import is_number, json_equal
from joins.core.keys import keys_equal
from joins.errors import ConfigError, JoinsError
from joins.sql.columns import ColumnRef

Row = Mapping[str, Any]
# Evaluates a (sub)expression on a (left row, right row) pair; a side may be None when only the
# other side's columns are referenced (per-side pre-filters).
Evaluator = Callable[[Row | None, Row | None], Any]
Predicate = Callable[[Row | None, Row | None], bool | None]
ColumnResolve = Callable[[exp.Column], ColumnRef]

SUPPORTED = ("column references, literals, INTERVAL, + - * / %, = <> < <= > >=, BETWEEN, AND, NOT, "
             "IS [NOT] NULL")

_MS_PER_UNIT: dict[str, int] = {
    "MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000,
    "WEEK": 604_800_000,
}


class EvaluationError(JoinsError):
    """The condition cannot be evaluated on a row pair (type mismatch, division by zero)."""


def interval_ms(node: exp.Interval) -> int:
    """`INTERVAL '1' HOUR` as milliseconds (timestamps are integer milliseconds)."""
    unit_node = node.args.get("unit")
    unit = unit_node.name.upper() if isinstance(unit_node, exp.Var) else ""
    unit = unit[:-1] if unit.endswith("S") else unit
    if unit not in _MS_PER_UNIT:
        raise ConfigError(f"condition: unsupported interval {node.sql()!r}; use one of "
                          f"{', '.join(_MS_PER_UNIT)}")
    try:
        amount = Fraction(node.this.name)
    except (ValueError, AttributeError):
        raise ConfigError(f"condition: interval {node.sql()!r} needs a number, "
                          f"like INTERVAL '1' HOUR") from None
    ms = amount * _MS_PER_UNIT[unit]
    if ms.denominator != 1:
        raise ConfigError(f"condition: interval {node.sql()!r} is not a whole number of milliseconds")
    return int(ms)


def number_literal(node: exp.Literal) -> int | float:
    text = node.this
    try:
        return int(text)
    except ValueError:
        return float(text)


def _check_numbers(op: str, a: Any, b: Any) -> None:
    if not (is_number(a) and is_number(b)):
        raise EvaluationError(f"'{op}' needs numbers, got {a!r} and {b!r}")


def sql_divide(a: Any, b: Any) -> Any:
    _check_numbers("/", a, b)
    if b == 0:
        raise EvaluationError(f"division by zero ({a!r} / 0)")
    if isinstance(a, int) and isinstance(b, int):
        quotient = abs(a) // abs(b)
        return quotient if (a >= 0) == (b >= 0) else -quotient
    return a / b


def sql_modulo(a: Any, b: Any) -> Any:
    _check_numbers("%", a, b)
    if b == 0:
        raise EvaluationError(f"division by zero ({a!r} % 0)")
    if isinstance(a, int) and isinstance(b, int):
        return a - b * sql_divide(a, b)
    remainder = abs(a) % abs(b)
    return remainder if a >= 0 else -remainder


def _arith(op: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        _check_numbers(op, a, b)
        return fn(a, b)
    return apply


ARITHMETIC: dict[type[exp.Expression], Callable[[Any, Any], Any]] = {
    exp.Add: _arith("+", operator.add),
    exp.Sub: _arith("-", operator.sub),
    exp.Mul: _arith("*", operator.mul),
    exp.Div: sql_divide,
    exp.Mod: sql_modulo,
}

ORDERINGS: dict[type[exp.Expression], Callable[[Any, Any], bool]] = {
    exp.LT: operator.lt, exp.LTE: operator.le, exp.GT: operator.gt, exp.GTE: operator.ge,
}
EQUALITIES: tuple[type[exp.Expression], ...] = (exp.EQ, exp.NEQ)


def sql_equal(a: Any, b: Any, *, as_keys: bool) -> bool | None:
    """`a = b`: NULL with a NULL operand; else key equality (`as_keys`, two bare columns) or
    JSON value equality. Never an error: values of different types are simply not equal."""
    if a is None or b is None:
        return None
    return keys_equal(a, b) if as_keys else json_equal(a, b)


def sql_compare(fn: Callable[[Any, Any], bool], a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    comparable = ((is_number(a) and is_number(b)) or (isinstance(a, str) and isinstance(b, str))
                  or (isinstance(a, bool) and isinstance(b, bool)))
    if not comparable:
        raise EvaluationError(f"cannot compare {a!r} with {b!r} (different types)")
    return fn(a, b)


def _truth(value: Any, what: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise EvaluationError(f"{what} needs a boolean, got {value!r}")


def sql_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def sql_not(a: bool | None) -> bool | None:
    return None if a is None else not a


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


class _Compiler:
    def __init__(self, resolve: ColumnResolve) -> None:
        self.resolve = resolve

    def compile(self, node: exp.Expression) -> Evaluator:
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            return self._column(self.resolve(node))
        if isinstance(node, exp.Literal):
            value: Any = node.this if node.is_string else number_literal(node)
            return lambda _lrow, _rrow: value
        if isinstance(node, exp.Boolean):
            flag = bool(node.this)
            return lambda _lrow, _rrow: flag
        if isinstance(node, exp.Null):
            return lambda _lrow, _rrow: None
        if isinstance(node, exp.Interval):
            ms = interval_ms(node)
            return lambda _lrow, _rrow: ms
        if isinstance(node, exp.Neg):
            return self._neg(self.compile(node.this))
        if type(node) in ARITHMETIC:
            return self._binary(ARITHMETIC[type(node)], node)
        if type(node) in ORDERINGS:
            return self._comparison(ORDERINGS[type(node)], node)
        if isinstance(node, EQUALITIES):
            return self._equality(node)
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            return self._between(node)
        if isinstance(node, exp.And):
            return self._and(self.compile(node.this), self.compile(node.expression))
        if isinstance(node, exp.Not):
            inner = self.compile(node.this)
            return lambda lrow, rrow: sql_not(_truth(inner(lrow, rrow), "NOT"))
        if isinstance(node, exp.Is):
            return self._is(node)
        raise ConfigError(f"condition: unsupported SQL {node.sql()!r} ({type(node).__name__}); "
                          f"supported: {SUPPORTED}")

    @staticmethod
    def _column(ref: ColumnRef) -> Evaluator:
        name = ref.name
        if ref.side == "left":
            return lambda lrow, _rrow: None if lrow is None else lrow.get(name)
        return lambda _lrow, rrow: None if rrow is None else rrow.get(name)

    @staticmethod
    def _neg(inner: Evaluator) -> Evaluator:
        def neg(lrow: Row | None, rrow: Row | None) -> Any:
            value = inner(lrow, rrow)
            if value is None:
                return None
            if not is_number(value):
                raise EvaluationError(f"unary '-' needs a number, got {value!r}")
            return -value
        return neg

    def _binary(self, fn: Callable[[Any, Any], Any], node: exp.Expression) -> Evaluator:
        left, right = self.compile(node.this), self.compile(node.expression)

        def binary(lrow: Row | None, rrow: Row | None) -> Any:
            a, b = left(lrow, rrow), right(lrow, rrow)
            return None if a is None or b is None else fn(a, b)
        return binary

    def _comparison(self, fn: Callable[[Any, Any], bool], node: exp.Expression) -> Evaluator:
        left, right = self.compile(node.this), self.compile(node.expression)
        return lambda lrow, rrow: sql_compare(fn, left(lrow, rrow), right(lrow, rrow))

    def _equality(self, node: exp.Expression) -> Evaluator:
        operands = (node.this, node.expression)
        as_keys = all(isinstance(_unparen(o), exp.Column) for o in operands)
        left, right = (self.compile(o) for o in operands)
        if isinstance(node, exp.EQ):
            return lambda lrow, rrow: sql_equal(left(lrow, rrow), right(lrow, rrow), as_keys=as_keys)
        return lambda lrow, rrow: sql_not(sql_equal(left(lrow, rrow), right(lrow, rrow),
                                                    as_keys=as_keys))

    def _between(self, node: exp.Between) -> Evaluator:
        value, low, high = (self.compile(node.this), self.compile(node.args["low"]),
                            self.compile(node.args["high"]))

        def between(lrow: Row | None, rrow: Row | None) -> bool | None:
            v = value(lrow, rrow)
            return sql_and(sql_compare(operator.ge, v, low(lrow, rrow)),
                           sql_compare(operator.le, v, high(lrow, rrow)))
        return between

    @staticmethod
    def _and(left: Evaluator, right: Evaluator) -> Evaluator:
        def conjunction(lrow: Row | None, rrow: Row | None) -> bool | None:
            a = _truth(left(lrow, rrow), "AND")
            if a is False:
                return False
            return sql_and(a, _truth(right(lrow, rrow), "AND"))
        return conjunction

    def _is(self, node: exp.Is) -> Evaluator:
        value = self.compile(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return lambda lrow, rrow: value(lrow, rrow) is None
        if isinstance(target, exp.Boolean):
            flag = bool(target.this)
            return lambda lrow, rrow: _truth(value(lrow, rrow), "IS") is flag
        raise ConfigError(f"condition: unsupported SQL {node.sql()!r}; IS takes NULL, TRUE or FALSE")


def compile_predicate(node: exp.Expression, resolve: ColumnResolve) -> Predicate:
    """A predicate returning True / False / None (NULL); only True means the rows join."""
    evaluate = _Compiler(resolve).compile(node)
    text = node.sql()

    def predicate(left: Row | None, right: Row | None) -> bool | None:
        return _truth(evaluate(left, right), f"the condition {text!r}")
    return predicate

