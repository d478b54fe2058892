"""The SQL front end of the interval join: time-bound extraction (seed 003), column resolution,
the compiled evaluator's three-valued logic, and the errors that refuse unbounded joins."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp

from joins.errors import ConfigError
from joins.sql import ColumnRef, EvaluationError, Schema, analyze_join_condition
from joins.sql.columns import ColumnResolver
from joins.sql.evaluator import compile_predicate
from joins.sql.parse import parse_condition

T = ["time"]


def bounds_of(condition: str, left: list[str] = T, right: list[str] = T) -> set[tuple[str, str, int]]:
    plan = analyze_join_condition(condition, left, right)
    return {(str(b.bounded), str(b.reference), b.postpone_ms) for b in plan.bounds}


LT, RT = "left.time", "right.time"

# (condition, expected canonical bounds `bounded >= reference - postpone`)
BOUND_CASES: list[tuple[str, set[tuple[str, str, int]]]] = [
    # seed 003's simple case: i2.time BETWEEN i1.time - 1 AND i1.time + 4
    ("r.time BETWEEN l.time - 1 AND l.time + 4", {(LT, RT, 4), (RT, LT, 1)}),
    ("l.time BETWEEN r.time - 1 AND r.time + 4", {(LT, RT, 1), (RT, LT, 4)}),
    ("l.time >= r.time - 5 AND r.time >= l.time - 7", {(LT, RT, 5), (RT, LT, 7)}),
    ("l.time <= r.time + 7 AND r.time <= l.time + 5", {(LT, RT, 5), (RT, LT, 7)}),
    # strict comparisons on integer milliseconds tighten by one
    ("l.time > r.time - 5 AND r.time > l.time - 7", {(LT, RT, 4), (RT, LT, 6)}),
    ("l.time < r.time + 3 AND l.time >= r.time", {(RT, LT, 2), (LT, RT, 0)}),
    ("r.time > l.time AND l.time >= r.time - 9", {(RT, LT, -1), (LT, RT, 9)}),
    # `=` gives both directions, with the offset on the right sign
    ("l.time = r.time", {(LT, RT, 0), (RT, LT, 0)}),
    ("l.time = r.time + 3", {(LT, RT, -3), (RT, LT, 3)}),
    ("(l.time) = (r.time)", {(LT, RT, 0), (RT, LT, 0)}),
    # constants fold; intervals are milliseconds
    ("r.time + 3600 * 1000 >= l.time AND l.time >= r.time", {(RT, LT, 3_600_000), (LT, RT, 0)}),
    ("l.time BETWEEN r.time AND r.time + INTERVAL '1' HOUR", {(RT, LT, 3_600_000), (LT, RT, 0)}),
    ("l.time BETWEEN r.time - INTERVAL '90' SECONDS AND r.time + INTERVAL '2' MINUTE",
     {(LT, RT, 90_000), (RT, LT, 120_000)}),
    ("l.time BETWEEN r.time - 7200000 / 2 AND r.time", {(LT, RT, 3_600_000), (RT, LT, 0)}),
    ("l.time BETWEEN r.time - (2 + 3) * 2 AND r.time - -1", {(LT, RT, 10), (RT, LT, 1)}),
    # differences on either side of the comparison
    ("r.time - l.time <= 10 AND l.time - r.time <= 10", {(LT, RT, 10), (RT, LT, 10)}),
    ("0 <= l.time - r.time + 2 AND (l.time - r.time) * 1 <= 5", {(LT, RT, 2), (RT, LT, 5)}),
    # NOT flips a comparison (time columns are never null)
    ("NOT (l.time < r.time - 3) AND NOT (l.time > r.time + 3)", {(LT, RT, 3), (RT, LT, 3)}),
    # the tightest bound per pair wins
    ("l.time BETWEEN r.time - 10 AND r.time + 10 AND l.time BETWEEN r.time - 2 AND r.time + 20",
     {(LT, RT, 2), (RT, LT, 10)}),
    ("l.time >= r.time - 5 AND l.time > r.time - 5 AND r.time >= l.time AND r.time >= l.time + 1",
     {(LT, RT, 4), (RT, LT, -1)}),
    # fractional constants: l - r >= -1.5 on integers is l - r >= -1
    ("l.time >= r.time - 1.5 AND l.time < r.time + 0.5", {(LT, RT, 1), (RT, LT, 0)}),
]


@pytest.mark.parametrize(("condition", "expected"), BOUND_CASES, ids=[c for c, _ in BOUND_CASES])
def test_time_bound_extraction(condition: str, expected: set[tuple[str, str, int]]) -> None:
    assert bounds_of(condition) == expected


def test_seed_003_join2_postpone_time_map() -> None:
    plan = analyze_join_condition("r.time BETWEEN d.time - 1 AND d.time + 4",
                                  ["o.time", "d.time"], ["r.time"])
    d, r = ColumnRef("left", "d.time"), ColumnRef("right", "r.time")
    # seed 003: 1 -> [{2, 1}], 2 -> [{1, 4}]; o.time (key 0) has no bound, so it is no time column
    assert plan.postpone_times == {d: ((r, 1),), r: ((d, 4),)}
    assert plan.time_columns == (d, r)
    assert {b.describe() for b in plan.bounds} == {"r.time >= d.time - 1", "d.time >= r.time - 4"}


def test_bare_equality_beside_time_bounds_is_an_equi_join_key() -> None:
    plan = analyze_join_condition("l.time BETWEEN r.time - 1 AND r.time + 1 AND l.k = r.k",
                                  ["time", "k"], ["time", "k"])
    assert {c.name for c in plan.time_columns} == {"time"}


def test_bare_equality_on_a_time_column_is_a_time_bound() -> None:
    plan = analyze_join_condition("l.t1 >= r.t - 5 AND r.t >= l.t1 - 5 AND l.t2 = r.t",
                                  ["t1", "t2"], ["t"])
    assert (ColumnRef("left", "t2"), ColumnRef("right", "t"), 0) in {
        (b.bounded, b.reference, b.postpone_ms) for b in plan.bounds}


def test_bare_equalities_alone_are_time_bounds() -> None:
    plan = analyze_join_condition("l.time = r.time AND l.k = r.k", ["time", "k"], ["time", "k"])
    assert {c.name for c in plan.time_columns} == {"time", "k"}


def test_same_input_relation_is_a_prefilter_not_a_bound() -> None:
    # seed 003: `l.time1 >= l.time2 + 10` is true or false per row, it bounds no buffer.
    plan = analyze_join_condition(
        "l.t1 >= l.t2 + 10 AND l.t1 BETWEEN r.t - 1 AND r.t + 1 AND r.w IS NOT NULL",
        ["t1", "t2"], ["t", "w"])
    assert {(str(b.bounded), str(b.reference)) for b in plan.bounds} == {
        ("left.t1", "right.t"), ("right.t", "left.t1")}
    assert set(plan.filters) == {"left", "right"}
    assert plan.filters["left"]({"t1": 20, "t2": 10}, None) is True
    assert plan.filters["left"]({"t1": 19, "t2": 10}, None) is False
    assert plan.filters["right"](None, {"t": 1, "w": None}) is False


def test_no_prefilter_when_every_conjunct_spans_both_inputs() -> None:
    assert analyze_join_condition("l.time = r.time", T, T).filters == {}


# -- exact equivalence of a comparison and its canonical bounds, on integers -------------------

RELATIONS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
             ">=": lambda a, b: a >= b, "=": lambda a, b: a == b}


@given(relation=st.sampled_from(sorted(RELATIONS)),
       constant=st.integers(-12, 12).map(lambda n: Fraction(n, 4)),
       left_first=st.booleans())
def test_canonical_bounds_are_equivalent_to_the_comparison(relation: str, constant: Fraction,
                                                           left_first: bool) -> None:
    """For every integer pair, the comparison holds exactly when its extracted bounds hold.

    The comparison is on column t; a BETWEEN on column u supplies the other bounds the config
    check needs. Catches an off-by-one in strict comparisons or a sign error in either direction.
    """
    literal = f"{float(constant)}" if constant.denominator != 1 else f"{int(constant)}"
    if left_first:
        text, holds = f"l.t {relation} r.t + ({literal})", (
            lambda x, y: RELATIONS[relation](x, y + constant))
    else:
        text, holds = f"r.t - ({literal}) {relation} l.t", (
            lambda x, y: RELATIONS[relation](y - constant, x))
    condition = f"{text} AND l.u BETWEEN r.u - 1 AND r.u + 1"
    if relation == "=" and constant.denominator != 1:
        # No two integer times differ by a fraction: no pair can join, and the join is refused.
        with pytest.raises(ConfigError, match="no pair of rows can join"):
            analyze_join_condition(condition, ["t", "u"], ["t", "u"])
        return
    plan = analyze_join_condition(condition, ["t", "u"], ["t", "u"])
    t_bounds = [b for b in plan.bounds if b.bounded.name == "t"]
    assert t_bounds, text
    for x, y in itertools.product(range(-8, 9), repeat=2):
        value = {"left": x, "right": y}
        by_bounds = all(value[b.bounded.side] >= value[b.reference.side] - b.postpone_ms
                        for b in t_bounds)
        if relation == "=" or len(t_bounds) == 1:
            assert by_bounds == holds(x, y), (text, x, y, [b.describe() for b in t_bounds])
        # The condition itself, compiled, agrees with the plain-Python meaning.
        assert (plan.predicate({"t": x, "u": 0}, {"t": y, "u": 0}) is True) == holds(x, y)


# -- refusals ----------------------------------------------------------------------------------

ERROR_CASES: list[tuple[str, list[str], list[str], str]] = [
    ("l.time BETWEEN r.time - 1 AND r.time + 1 OR l.k = r.k", ["time", "k"], ["time", "k"],
     "OR is not supported"),
    ("l.time BETWEEN r.time - 1 AND r.time + 1 AND (l.a = 1 OR l.b = 2)", ["time", "a", "b"], T,
     "OR is not supported"),
    ("l.time BETWEEN SYMMETRIC r.time - 1 AND r.time + 1", T, T, "OR is not supported"),
    ("l.time >= r.time - 5", T, T, "no time bound limits how long right rows are buffered"),
    ("r.time >= l.time - 5", T, T, "no time bound limits how long left rows are buffered"),
    ("l.time >= r.time - 5 AND l.k = r.k", ["time", "k"], ["time", "k"],
     "`l.k = r.k` is read as an equi-join key"),
    ("d.time BETWEEN o.time AND o.time + o.deadline", ["o.time", "o.deadline"], ["d.time"],
     "non-constant bound"),
    ("d.time BETWEEN o.time AND o.time + o.deadline", ["o.time", "o.deadline"], ["d.time"],
     "how long left rows are buffered"),
    ("l.time >= r.time * r.k AND r.time >= l.time", ["time"], ["time", "k"],
     "is not a constant bound: its offset multiplies"),
    # A function in the offset: the message says the bound is not a constant (not only that
    # the function is unsupported).
    ("d.time BETWEEN o.time AND o.time + ABS(o.deadline)", ["o.time", "o.deadline"], ["d.time"],
     "is not a constant bound: its offset holds ABS(o.deadline), a function of a column"),
    ("l.time >= 2 * r.time AND r.time >= l.time", T, T, "is not of the form"),
    ("l.time = r.time AND l.nope = 1", T, T, "unknown column l.nope"),
    ("time = 1", T, T, "column time is ambiguous"),
    ("l.time = r.time AND x.q = 1", T, T, "unknown alias 'x'"),
    ("o.time = d.time", ["time"], ["time"], "alias 'o' is ambiguous"),
    ("l.time = r.time AND ABS(l.time) > 1", T, T, "unsupported SQL"),
    ("l.time = r.time AND l.time IN (1, 2)", T, T, "unsupported SQL"),
    ("l.time = r.time AND l.time <=> 1", T, T, "unsupported SQL"),
    ("l.time BETWEEN r.time AND r.time + INTERVAL '1' MONTH", T, T, "unsupported interval"),
    # Bounds no pair meets: a BETWEEN written upper bound first, strict bounds that exclude each
    # other, and a cycle through a second pair of time columns.
    ("l.time BETWEEN r.time + 10 AND r.time", T, T,
     "no pair of rows can join: the time bounds `l.time >= r.time + 10` and `r.time >= l.time - 0`"),
    ("l.time >= r.time AND l.time < r.time", T, T, "no pair of rows can join"),
    ("l.t BETWEEN r.t + 10 AND r.t + 20 AND r.t BETWEEN l.u AND l.u + 5 "
     "AND l.u BETWEEN r.v AND r.v + 1 AND l.t BETWEEN r.v - 100 AND r.v", ["t", "u"], ["t", "v"],
     "no pair of rows can join"),
    # An offset whose sum with an event time overflows a long (Spark fails, Python does not).
    ("l.time BETWEEN r.time AND r.time + 9223372036854775807", T, T,
     "the time offset of `l.time BETWEEN r.time AND r.time + 9223372036854775807` is "
     "9223372036854775807 ms, over the largest an interval join takes"),
    ("l.time BETWEEN r.time - INTERVAL '99999999999' DAY AND r.time", T, T,
     "is 8639999999913600000 ms, over the largest"),
    ("l.time >= r.time -", T, T, "not a valid SQL expression"),
    ("SELECT 1", T, T, "not a statement"),
    ("l.time = r.time; DROP TABLE x", T, T, "not a statement"),
    ("   ", T, T, "must not be empty"),
    ("a.b.c = 1", T, T, "too many parts"),
]


@pytest.mark.parametrize(("condition", "left", "right", "message"), ERROR_CASES,
                         ids=[f"{m}:{c}" for c, _, _, m in ERROR_CASES])
def test_refused_conditions(condition: str, left: list[str], right: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        analyze_join_condition(condition, left, right)
    assert message in str(info.value)


# -- column resolution and watermark names ------------------------------------------------------

def resolve_all(condition: str, left: list[str], right: list[str]) -> list[ColumnRef]:
    parsed = parse_condition(condition)
    resolver = ColumnResolver.for_condition(Schema(tuple(left), tuple(right)), parsed)
    return [resolver.resolve(c) for c in parsed.find_all(exp.Column)]


def test_aliases_inferred_from_the_columns() -> None:
    refs = resolve_all("d.delivery_time BETWEEN o.order_time AND o.order_time + 1 "
                       "AND d.order_id = o.order_id",
                       ["order_id", "order_time"], ["order_id", "delivery_time"])
    assert set(refs) == {ColumnRef("right", "delivery_time"), ColumnRef("left", "order_time"),
                         ColumnRef("right", "order_id"), ColumnRef("left", "order_id")}


def test_qualified_column_names_and_their_prefix_aliases() -> None:
    refs = resolve_all('r.time >= d.time AND "o.time" > 0 AND o.k = r.k AND l.k = 1',
                       ["o.time", "d.time", "k"], ["r.time", "k"])
    assert sorted(refs) == sorted([
        ColumnRef("right", "r.time"), ColumnRef("left", "d.time"), ColumnRef("left", "o.time"),
        ColumnRef("left", "k"), ColumnRef("right", "k"), ColumnRef("left", "k")])


def test_watermark_names() -> None:
    schema = Schema(("id", "time", "o.time"), ("id", "time", "d.time"))
    assert schema.watermark_name(ColumnRef("left", "time")) == "l.time"
    assert schema.watermark_name(ColumnRef("right", "time")) == "r.time"
    assert schema.watermark_name(ColumnRef("left", "o.time")) == "o.time"
    assert schema.watermark_column("left", "time") == ColumnRef("left", "time")
    assert schema.watermark_column("left", "l.time") == ColumnRef("left", "time")
    assert schema.watermark_column("left", "r.time") is None
    assert schema.watermark_column("right", "o.time") is None
    for side, names in (("left", schema.left_columns), ("right", schema.right_columns)):
        for name in names:
            ref = ColumnRef(side, name)  # type: ignore[arg-type]
            assert schema.ref_of_watermark_name(schema.watermark_name(ref)) == ref


# -- the compiled condition: SQL three-valued logic ----------------------------------------------

def predicate(condition: str, left: list[str], right: list[str]):  # type: ignore[no-untyped-def]
    parsed = parse_condition(condition)
    resolver = ColumnResolver.for_condition(Schema(tuple(left), tuple(right)), parsed)
    return compile_predicate(parsed, resolver.resolve)


@pytest.mark.parametrize(("condition", "left", "right", "expected"), [
    ("l.a = r.b", {"a": 1}, {"b": 1}, True),
    ("l.a = r.b", {"a": None}, {"b": 1}, None),
    ("l.a = r.b", {}, {"b": 1}, None),  # an absent column reads as NULL
    ("l.a <> r.b", {"a": None}, {"b": None}, None),
    ("l.a = r.b AND l.c > 0", {"a": None, "c": 0}, {"b": 1}, False),  # NULL AND FALSE
    ("l.a = r.b AND l.c > 0", {"a": None, "c": 1}, {"b": 1}, None),  # NULL AND TRUE
    ("NOT (l.a = r.b)", {"a": None}, {"b": 1}, None),
    ("l.a IS NULL", {"a": None}, {}, True),
    ("l.a IS NOT NULL", {"a": None}, {}, False),
    ("(l.a = r.b) IS NULL", {"a": None}, {"b": 1}, True),
    ("l.flag IS TRUE", {"flag": None}, {}, False),
    ("l.flag IS NOT FALSE", {"flag": None}, {}, True),
    ("l.flag", {"flag": True}, {}, True),
    ("l.a BETWEEN r.b - 1 AND r.b + 1", {"a": 5}, {"b": None}, None),
    ("l.a BETWEEN r.b - 1 AND r.b + 1", {"a": 9}, {"b": None}, None),
    ("l.a BETWEEN 1 AND r.b", {"a": 0}, {"b": None}, False),  # FALSE AND NULL
    ("l.a + r.b * 2 = 7", {"a": 1}, {"b": 3}, True),
    ("l.a / 2 = -3", {"a": -7}, {}, True),  # integer division truncates toward zero
    ("l.a % 3 = -1", {"a": -7}, {}, True),  # the remainder takes the dividend's sign
    ("l.a / 2 = 3.5", {"a": 7.0}, {}, True),
    ("-l.a = r.b", {"a": 2}, {"b": -2}, True),
    ("l.s = 'x' AND TRUE", {"s": "x"}, {}, True),
    ("l.s < r.s", {"s": "a"}, {"s": "b"}, True),
    ("NULL = NULL", {}, {}, None),
    ("l.a + NULL = 1", {"a": 1}, {}, None),
    # Equality never fails. Two bare columns compare as keys (value and JSON type) ...
    ("l.a = r.b", {"a": "1"}, {"b": 1}, False),
    ("l.a = r.b", {"a": True}, {"b": 1}, False),
    ("l.a = r.b", {"a": 1}, {"b": 1.0}, False),
    ("l.a <> r.b", {"a": 1}, {"b": 1.0}, True),
    ("(l.a) = (r.b)", {"a": 1}, {"b": 1.0}, False),
    ("l.a = r.b", {"a": {"x": 1, "y": [1, "z"]}}, {"b": {"y": [1, "z"], "x": 1}}, True),
    ("l.a = r.b", {"a": {"x": 1}}, {"b": {"x": 1.0}}, False),
    # ... a literal or a computed operand as a JSON value: numbers by value, other types unequal.
    ("l.a = 1.0", {"a": 1}, {}, True),
    ("l.a + 0 = r.b", {"a": 1}, {"b": 1.0}, True),
    ("l.a = 1", {"a": True}, {}, False),
    ("l.a <> 'x'", {"a": 1}, {}, True),
    ("l.s = 'x'", {"s": 1}, {}, False),
])
def test_three_valued_logic(condition: str, left: dict[str, object], right: dict[str, object],
                            expected: bool | None) -> None:
    columns = ["a", "c", "flag", "s"]
    assert predicate(condition, columns, ["b", "s"])(left, right) is expected


@pytest.mark.parametrize(("condition", "left", "right", "message"), [
    ("l.a < r.b", {"a": "1"}, {"b": 1}, "cannot compare"),
    ("l.a >= r.b", {"a": True}, {"b": 1}, "cannot compare"),
    ("l.a BETWEEN r.b AND 3", {"a": "x"}, {"b": 1}, "cannot compare"),
    ("l.a + 1 = r.b", {"a": "x"}, {"b": 1}, "needs numbers"),
    ("l.a / 0 = r.b", {"a": 1}, {"b": 1}, "division by zero"),
    ("l.a AND r.b = 1", {"a": 3}, {"b": 1}, "needs a boolean"),
])
def test_evaluation_errors_are_never_a_silent_false(condition: str, left: dict[str, object],
                                                    right: dict[str, object], message: str) -> None:
    with pytest.raises(EvaluationError, match=message):
        predicate(condition, ["a"], ["b"])(left, right)


def test_a_non_boolean_condition_is_an_evaluation_error() -> None:
    with pytest.raises(EvaluationError, match="needs a boolean"):
        predicate("l.a + 1", ["a"], ["b"])({"a": 1}, {})
