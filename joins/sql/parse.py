"""Parse the ON-clause text of a join and split it into its ANDed conjuncts (sqlglot)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from joins.errors import ConfigError


def parse_condition(text: str) -> exp.Expression:
    """The condition as one sqlglot expression; a ConfigError if it is not one valid expression.

    A disjunction is refused wherever it appears (seed 003: "If there's a disjunction (OR
    expression), we will not implement such query, even if all disjunct parts contain the needed
    time bounds"); BETWEEN SYMMETRIC is a disjunction in disguise.
    """
    if not text or not text.strip():
        raise ConfigError("condition: must not be empty")
    try:
        parsed = sqlglot.parse_one(text)
    except (ParseError, TokenError) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"condition: not a valid SQL expression: {first_line}") from None
    if isinstance(parsed, exp.Query | exp.Block | exp.Command | exp.DDL | exp.DML):
        raise ConfigError(f"condition: must be the expression of an ON clause, not a statement "
                          f"({parsed.sql()!r})")
    for node in parsed.walk():
        if isinstance(node, exp.Or) or (isinstance(node, exp.Between) and node.args.get("symmetric")):
            raise ConfigError(
                f"condition: OR is not supported (found {node.sql()!r}): a disjunction cannot bound "
                f"the join's buffers; write the condition as ANDed comparisons")
    return parsed


def conjuncts(node: exp.Expression) -> list[exp.Expression]:
    """The ANDed parts of `node`, parentheses removed, in text order."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]
