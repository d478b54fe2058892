"""The analysed join condition of a stream-to-stream join: time bounds (`time_bounds.py`), the
per-side pre-filters, the equi-join keys and the compiled predicate, or a ConfigError naming what
makes the join unbounded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from joins.errors import ConfigError
from joins.sql.columns import SIDE_ALIAS, SIDES, ColumnRef, ColumnResolver, Schema, Side, other_side
from joins.sql.evaluator import ColumnResolve, Predicate, compile_predicate
from joins.sql.parse import conjuncts, parse_condition
from joins.sql.time_bounds import (
    MAX_OFFSET_MS,
    PostponeTimeMap,
    TimeBound,
    contradiction,
    examine,
    postpone_time_map,
    select_time_bounds,
    tightest,
    unparen,
)


@dataclass(frozen=True)
class JoinConditionPlan:
    """Everything the interval join needs from its condition."""

    condition: str
    schema: Schema
    # The whole condition, evaluated on every (left, right) candidate pair.
    predicate: Predicate
    # Conjuncts on one input only; a row failing its side's filter is never buffered.
    filters: dict[Side, Predicate]
    # Tightest bound per (bounded, reference) pair.
    bounds: tuple[TimeBound, ...]
    postpone_times: PostponeTimeMap
    # Columns in some bound, left first, config order: watermarked from the start, so every row
    # must hold an integer in each of them.
    time_columns: tuple[ColumnRef, ...]
    # For engines that compile the condition themselves (Spark): the parsed condition, its
    # column resolution, the per-side filter conjuncts, and every bare equality of a left and a
    # right column (`l.k = r.k`, also `l.time = r.time`) as (left, right): equi-join keys.
    parsed: exp.Expression | None = None
    resolve: ColumnResolve | None = None
    filter_parts: tuple[tuple[Side, exp.Expression], ...] = ()
    equi_keys: tuple[tuple[ColumnRef, ColumnRef], ...] = ()

    def window(self, bounded: ColumnRef, reference: ColumnRef) -> tuple[int, int] | None:
        """(a, b) with `bounded - reference` in [-a, b], when bounds limit both directions of
        that pair of columns (None otherwise)."""
        by_pair = {(b.bounded, b.reference): b.postpone_ms for b in self.bounds}
        if (bounded, reference) in by_pair and (reference, bounded) in by_pair:
            return by_pair[(bounded, reference)], by_pair[(reference, bounded)]
        return None


def _missing_bound_message(side: Side, rejected: list[str], keys: list[str]) -> str:
    other = other_side(side)
    mine, theirs = SIDE_ALIAS[side], SIDE_ALIAS[other]
    message = (f"condition: no time bound limits how long {side} rows are buffered: the {side} "
               f"input needs a constant bound against the {other} input, like "
               f"`{mine}.time >= {theirs}.time - <constant>` (for example "
               f"`{mine}.time BETWEEN {theirs}.time - 10 AND {theirs}.time + 10`)")
    if rejected:
        message += "; not usable as a time bound: " + "; ".join(rejected)
    for key in keys:
        a, _, b = key.partition(" = ")
        message += (f"; `{key}` is read as an equi-join key, not a time bound (write "
                    f"`{a} BETWEEN {b} AND {b}` if it relates time columns)")
    return message


def equi_key_of(conjunct: exp.Expression, resolve: ColumnResolve) -> tuple[ColumnRef, ColumnRef] | None:
    node = unparen(conjunct)
    if not isinstance(node, exp.EQ):
        return None
    a, b = unparen(node.this), unparen(node.expression)
    if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
        return None
    x, y = resolve(a), resolve(b)
    if x.side == y.side:
        return None
    return (x, y) if x.side == "left" else (y, x)


def analyze_join_condition(condition: str, left_columns: Sequence[str],
                           right_columns: Sequence[str]) -> JoinConditionPlan:
    """Parse, resolve, compile and extract the time bounds of a join condition (or ConfigError)."""
    schema = Schema(tuple(left_columns), tuple(right_columns))
    parsed = parse_condition(condition)
    resolver = ColumnResolver.for_condition(schema, parsed)
    resolve = resolver.resolve

    per_side: dict[Side, list[exp.Expression]] = {"left": [], "right": []}
    candidates: list[TimeBound] = []
    rejected: list[str] = []
    equi: list[tuple[ColumnRef, ColumnRef]] = []
    for conjunct in conjuncts(parsed):
        sides = resolver.sides_of(conjunct)
        if len(sides) == 1:
            per_side[next(iter(sides))].append(conjunct)
        elif len(sides) == 2:
            bounds, reasons = examine(conjunct, resolve)
            candidates.extend(bounds)
            rejected.extend(reasons)
            key = equi_key_of(conjunct, resolve)
            if key is not None and key not in equi:
                equi.append(key)

    selected, keys = select_time_bounds(candidates)
    bounds = tightest(selected)
    for side in SIDES:
        if not any(b.bounded.side == side for b in bounds):
            raise ConfigError(_missing_bound_message(side, rejected, keys))
    too_far = next((b for b in candidates if abs(b.postpone_ms) > MAX_OFFSET_MS), None)
    if too_far is not None:
        raise ConfigError(
            f"condition: the time offset of `{too_far.source}` is {abs(too_far.postpone_ms)} ms, "
            f"over the largest an interval join takes ({MAX_OFFSET_MS} ms, about 31,700 years): "
            "an event time plus it overflows 64-bit milliseconds")
    contradicting = contradiction(bounds)
    if contradicting:
        # Flink SQL runs such a join as one that never matches (an outer join pads every row);
        # nobody writes that on purpose: it is a slip in the bounds, told before any run.
        sources = list(dict.fromkeys(b.source for b in contradicting))
        raise ConfigError(
            "condition: no pair of rows can join: the time bounds "
            + " and ".join(f"`{b.describe()}`" for b in contradicting)
            + f" cannot all hold (from {'; '.join(f'`{s}`' for s in sources)}); is a lower bound "
            "above its upper one (`BETWEEN` takes the lower first)?")
    time_columns = tuple(schema.ordered(c for b in bounds for c in (b.bounded, b.reference)))
    # Compiled after the bounds: a condition the engine cannot bound says so first, even where
    # an unsupported function is what makes a bound non-constant.
    predicate = compile_predicate(parsed, resolve)
    filters = {side: compile_predicate(exp.and_(*parts), resolve)
               for side, parts in per_side.items() if parts}
    return JoinConditionPlan(
        condition=condition, schema=schema, predicate=predicate, filters=filters, bounds=bounds,
        postpone_times=postpone_time_map(bounds, time_columns), time_columns=time_columns,
        parsed=parsed, resolve=resolve,
        filter_parts=tuple((side, exp.and_(*parts)) for side, parts in per_side.items() if parts),
        equi_keys=tuple(equi))
