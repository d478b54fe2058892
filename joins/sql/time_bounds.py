"""Time bounds of a stream-to-stream join condition (seed 003, "Simple case for two inputs").

Every ANDed comparison that relates a column of one input to a column of the other by a constant
offset is rewritten into the canonical form

    bounded >= reference - postpone_ms

(`bounded` is the output watermark key, `reference` the input watermark key, `postpone_ms` the
postpone time). Comparisons are first made linear, `A op B` becoming `D = A - B` compared with 0,
where `D = x - y + k` for two time columns x, y and a constant k. Timestamps are integer
milliseconds, so strict comparisons tighten by one:

    D >= 0  ⇒  x >= y - floor(k)          D > 0  ⇒  x >= y - (ceil(k) - 1)
    D <= 0  ⇒  y >= x - floor(-k)         D < 0  ⇒  y >= x - (ceil(-k) - 1)

so `a < b + c` gives `b >= a - (c - 1)` and `a > b + c` gives `a >= b - (-c - 1)`. `=` gives both
directions, `v BETWEEN lo AND hi` is `v >= lo AND v <= hi`, `NOT (a < b)` is `a >= b` (time
columns are never null). Constant arithmetic folds (`3600 * 1000`, `INTERVAL '1' HOUR`). Of
several bounds for the same (bounded, reference) pair the tightest (lowest postpone time) wins.

The config does not say which columns hold time, so a bare column equality (`l.k = r.k`, no
arithmetic) is read as an equi-join key unless it touches a column of another bound or the
condition has no other bound at all (`l.time = r.time`); see `select_time_bounds`. The columns of
the chosen bounds are the time columns: every row must hold an integer there.

`plan.py` assembles the whole analysis. Refused with a ConfigError (there): an OR anywhere; no
bound in one direction (the message names the
input whose buffer would grow forever and lists the comparisons that could not be used, such as
a non-constant bound `d.time <= o.time + o.deadline`). Conjuncts on one input only are per-side
pre-filters (rows failing them are never buffered); a comparison between two columns of the same
input is such a pre-filter, never a time bound (seed 003: it is true or false per row).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from joins.sql.columns import SIDE_ALIAS, ColumnRef
from joins.sql.evaluator import (
    ColumnResolve,
    interval_ms,
    number_literal,
    sql_divide,
    sql_modulo,
)

# The largest offset a time bound may hold (about 31,700 years). Event times are epoch ms in a
# 64-bit long; Spark's arithmetic on them fails on overflow (ANSI) where the reference's Python
# ints do not, and no event time up to year 9999 (2.5e14 ms) plus this can overflow.
MAX_OFFSET_MS = 10**15


@dataclass(frozen=True)
class TimeBound:
    """`bounded >= reference - postpone_ms`: once the reference column's watermark is W, a row
    whose `bounded` value is below W - postpone_ms can never join a future row."""

    bounded: ColumnRef
    reference: ColumnRef
    postpone_ms: int
    # The conjunct it came from, as SQL.
    source: str
    # From `a.x = b.y` with no arithmetic: maybe an equi-join key (see select_time_bounds).
    bare_equality: bool = False

    def describe(self) -> str:
        sign = "-" if self.postpone_ms >= 0 else "+"
        return (f"{_display(self.bounded)} >= {_display(self.reference)} "
                f"{sign} {abs(self.postpone_ms)}")


# inputWmKey -> [(outputWmKey, postponeTime)], as seed 003's postponeTimeMap.
PostponeTimeMap = dict[ColumnRef, tuple[tuple[ColumnRef, int], ...]]


@dataclass(frozen=True)
class Linear:
    """sum(coefficient * column) + constant."""

    terms: tuple[tuple[ColumnRef, Fraction], ...]
    constant: Fraction

    @staticmethod
    def of(terms: dict[ColumnRef, Fraction], constant: Fraction) -> Linear:
        return Linear(tuple(sorted((c, k) for c, k in terms.items() if k != 0)), constant)

    def scaled(self, factor: Fraction) -> Linear:
        return Linear.of({c: k * factor for c, k in self.terms}, self.constant * factor)

    def plus(self, other: Linear, sign: int = 1) -> Linear:
        terms: dict[ColumnRef, Fraction] = defaultdict(Fraction, dict(self.terms))
        for column, k in other.terms:
            terms[column] += sign * k
        return Linear.of(terms, self.constant + sign * other.constant)

    @property
    def is_constant(self) -> bool:
        return not self.terms


def linearize(node: exp.Expression, resolve: ColumnResolve) -> Linear | None:
    """`node` as a linear form over columns, or None when it is not one (a product of columns,
    a string, a division of a column, ...). Constants fold with the evaluator's arithmetic."""
    if isinstance(node, exp.Paren):
        return linearize(node.this, resolve)
    if isinstance(node, exp.Column):
        return Linear.of({resolve(node): Fraction(1)}, Fraction(0))
    if isinstance(node, exp.Literal) and not node.is_string:
        return Linear((), Fraction(number_literal(node)))
    if isinstance(node, exp.Interval):
        return Linear((), Fraction(interval_ms(node)))
    if isinstance(node, exp.Neg):
        inner = linearize(node.this, resolve)
        return None if inner is None else inner.scaled(Fraction(-1))
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod):
        a, b = linearize(node.this, resolve), linearize(node.expression, resolve)
        if a is None or b is None:
            return None
        if isinstance(node, exp.Add):
            return a.plus(b)
        if isinstance(node, exp.Sub):
            return a.plus(b, -1)
        if isinstance(node, exp.Mul):
            if a.is_constant:
                return b.scaled(a.constant)
            return a.scaled(b.constant) if b.is_constant else None
        # Division and modulo fold only between constants: on columns they truncate, which is
        # not linear.
        if a.is_constant and b.is_constant:
            fold = sql_divide if isinstance(node, exp.Div) else sql_modulo
            try:
                return Linear((), Fraction(fold(_plain(a.constant), _plain(b.constant))))
            except ArithmeticError:
                return None
        return None
    return None


def _plain(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


def _display(ref: ColumnRef) -> str:
    if "." in ref.name:
        return ref.name
    return f"{SIDE_ALIAS[ref.side]}.{ref.name}"


_RELATIONS = {exp.GTE: ">=", exp.GT: ">", exp.LTE: "<=", exp.LT: "<", exp.EQ: "="}
# NOT flips a comparison exactly because time columns are never null; NOT (a = b) bounds nothing.
_NEGATED = {">=": "<", ">": "<=", "<=": ">", "<": ">="}


def unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def comparisons(node: exp.Expression) -> list[tuple[exp.Expression, exp.Expression, str]]:
    """(A, B, relation) parts meaning `A relation B`; empty if `node` is no comparison."""
    node = unparen(node)
    if isinstance(node, exp.Not):
        inner = comparisons(node.this)
        if len(inner) != 1 or inner[0][2] not in _NEGATED:
            return []
        a, b, relation = inner[0]
        return [(a, b, _NEGATED[relation])]
    if isinstance(node, exp.Between) and not node.args.get("symmetric"):
        return [(node.this, node.args["low"], ">="), (node.this, node.args["high"], "<=")]
    relation = _RELATIONS.get(type(node))
    return [] if relation is None else [(node.this, node.expression, relation)]


def _bounds_of(difference: Linear, relation: str, source: str, bare: bool) -> list[TimeBound]:
    """Canonical bounds from `D relation 0` where D = x - y + k (see the module docstring)."""
    (c1, k1), (c2, _k2) = difference.terms
    x, y = (c1, c2) if k1 == 1 else (c2, c1)
    k = difference.constant
    bounds: list[TimeBound] = []
    if relation in (">=", "="):
        bounds.append(TimeBound(x, y, math.floor(k), source, bare))
    if relation == ">":
        bounds.append(TimeBound(x, y, math.ceil(k) - 1, source, bare))
    if relation in ("<=", "="):
        bounds.append(TimeBound(y, x, math.floor(-k), source, bare))
    if relation == "<":
        bounds.append(TimeBound(y, x, math.ceil(-k) - 1, source, bare))
    return bounds


def _why_not_constant(*sides: exp.Expression) -> str:
    """Why `a op b` is no `x >= y - constant` (linearize gave up): a function, or columns
    multiplied or divided."""
    for side in sides:
        for node in side.walk():
            if isinstance(node, exp.Func) and not isinstance(node, exp.Binary | exp.Interval) \
                    and node.find(exp.Column) is not None:
                return (f"its offset holds {node.sql()}, a function of a column, so it changes "
                        f"from row to row; the offset must be a constant")
    return ("its offset multiplies or divides columns, so it changes from row to row; the offset "
            "must be a constant")


def examine(conjunct: exp.Expression, resolve: ColumnResolve) -> tuple[list[TimeBound], list[str]]:
    """The time bounds a two-input conjunct yields, and why its other parts could not be used."""
    bounds: list[TimeBound] = []
    rejected: list[str] = []
    for a, b, relation in comparisons(conjunct):
        text = f"{a.sql()} {relation} {b.sql()}"
        la, lb = linearize(a, resolve), linearize(b, resolve)
        if la is None or lb is None:
            rejected.append(f"`{text}` is not a constant bound: {_why_not_constant(a, b)}")
            continue
        difference = la.plus(lb, -1)
        if len({c.side for c, _ in difference.terms}) < 2:
            continue  # one input only: part of a pre-filter, not a bound between the inputs
        if len(difference.terms) == 2 and sorted(k for _, k in difference.terms) == [-1, 1]:
            bare = (relation == "=" and isinstance(unparen(a), exp.Column)
                    and isinstance(unparen(b), exp.Column))
            bounds.extend(_bounds_of(difference, relation, unparen(conjunct).sql(), bare))
        elif len(difference.terms) > 2:
            columns = ", ".join(_display(c) for c, _ in difference.terms)
            rejected.append(f"`{text}` is a non-constant bound (it involves the columns {columns}; "
                            f"the offset must be a constant)")
        else:
            rejected.append(f"`{text}` is not of the form a.time >= b.time - constant")
    return bounds, rejected


def tightest(bounds: Sequence[TimeBound]) -> tuple[TimeBound, ...]:
    best: dict[tuple[ColumnRef, ColumnRef], TimeBound] = {}
    for bound in bounds:
        pair = (bound.bounded, bound.reference)
        if pair not in best or bound.postpone_ms < best[pair].postpone_ms:
            best[pair] = bound
    return tuple(best[pair] for pair in sorted(best))


def contradiction(bounds: Sequence[TimeBound]) -> list[TimeBound]:
    """Bounds that no pair of rows meets together (empty: some pair can). Each bound is the
    difference constraint `reference - bounded <= postpone_ms`; they contradict each other
    exactly when a cycle of them sums below zero (`b >= a + 10` and `b <= a`: 10 > 0). Returned:
    the bounds between the columns on such a cycle."""
    columns = sorted({c for b in bounds for c in (b.bounded, b.reference)})
    at = {c: i for i, c in enumerate(columns)}
    inf = math.inf
    dist = [[0 if i == j else inf for j in range(len(columns))] for i in range(len(columns))]
    for b in bounds:
        i, j = at[b.bounded], at[b.reference]
        dist[i][j] = min(dist[i][j], b.postpone_ms)
    for k in range(len(columns)):
        for i in range(len(columns)):
            for j in range(len(columns)):
                dist[i][j] = min(dist[i][j], dist[i][k] + dist[k][j])
    cycle = {c for c in columns if dist[at[c]][at[c]] < 0}
    return [b for b in bounds if b.bounded in cycle and b.reference in cycle]


def postpone_time_map(bounds: Sequence[TimeBound], time_columns: Sequence[ColumnRef]) -> PostponeTimeMap:
    entries: dict[ColumnRef, list[tuple[ColumnRef, int]]] = {c: [] for c in time_columns}
    for bound in bounds:
        entries[bound.reference].append((bound.bounded, bound.postpone_ms))
    return {c: tuple(sorted(v)) for c, v in entries.items()}


def select_time_bounds(candidates: Sequence[TimeBound]) -> tuple[list[TimeBound], list[str]]:
    """Which candidate bounds are time bounds (the config does not say which columns hold time),
    and the bare equalities set aside as equi-join keys.

    Inequalities, BETWEEN and equalities with an offset (`l.t = r.t + 5`) always are. A bare
    column equality (`l.k = r.k`) is read as an equi-join key, unless one of its columns is a time
    column by another bound, or the condition has no other time bound at all (seed 003's
    `l.time = r.time`): then every bare equality is a time bound, and its columns must hold
    integers.
    """
    chosen = [b for b in candidates if not b.bare_equality]
    if not chosen:
        return list(candidates), []
    time_columns = {c for b in chosen for c in (b.bounded, b.reference)}
    keys: list[str] = []
    for bound in candidates:
        if not bound.bare_equality:
            continue
        if bound.bounded in time_columns or bound.reference in time_columns:
            chosen.append(bound)
        elif bound.source not in keys:
            keys.append(bound.source)
    return chosen, keys
