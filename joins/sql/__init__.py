"""The SQL front end of the joins: parse an ON clause (sqlglot), resolve its columns to the two
inputs, compile it into a Python predicate and extract the time bounds of seed 003."""

from joins.sql.columns import SIDES, ColumnRef, Schema, Side
from joins.sql.evaluator import EvaluationError, Predicate
from joins.sql.plan import JoinConditionPlan, analyze_join_condition
from joins.sql.time_bounds import PostponeTimeMap, TimeBound

__all__ = [
    "SIDES",
    "ColumnRef",
    "EvaluationError",
    "JoinConditionPlan",
    "PostponeTimeMap",
    "Predicate",
    "Schema",
    "Side",
    "TimeBound",
    "analyze_join_condition",
]
