"""A query over one table, planned onto a table operator (KTable#filter, KTable#mapValues,
KGroupedTable aggregation): `WHERE <column> <op> <literal>` -> the versioned filter,
`SELECT a, b AS c FROM t` -> the map (a projection with renames), `SELECT g, COUNT(*) |
SUM(x) ... GROUP BY g` -> the aggregate. The table is a source of the folder (a changelog) or
another pipeline's output, read by name (`upstream`)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from joins.sql.evaluator import number_literal
from joins.sql.pipeline.relations import Planned, Relation, Resolver
from joins.sql.pipeline.text import SqlText

_OPS: dict[type[exp.Expression], tuple[str, str]] = {
    exp.EQ: ("eq", "eq"), exp.NEQ: ("ne", "ne"), exp.LT: ("lt", "gt"), exp.LTE: ("le", "ge"),
    exp.GT: ("gt", "lt"), exp.GTE: ("ge", "le")}
_FILTER = ("the versioned filter takes one comparison of a column with a literal (=, <>, <, <=, "
           ">, >=, IN (...), NOT IN (...), IS [NOT] NULL); write further conditions as a "
           "pipeline over this one")


def plan_single(src: SqlText, rel: Relation, query: exp.Select) -> Planned:
    where, group = query.args.get("where"), query.args.get("group")
    resolver = Resolver(src, (rel,))
    raw: dict[str, Any] = ({"source": {"source": rel.name}} if rel.source is not None
                           else {"upstream": rel.name})
    if where is not None and group is not None:
        raise src.error(group, "GROUP BY with WHERE: the aggregate reads its whole input; "
                               "filter in a pipeline of its own and aggregate that one by name")
    if group is not None:
        planned = _aggregate(src, query, group, resolver, raw)
    elif where is not None:
        planned = _filter(src, query, where.this, resolver, raw)
    else:
        planned = _map(src, query, resolver, raw)
    planned.positions |= {"source": src.at(rel.node), "upstream": src.at(rel.node)}
    planned.side(rel, {k: (k,) for k in ("versioned", "history_retention_ms")})
    return planned


def _aggregate(src: SqlText, query: exp.Select, group: exp.Group, resolver: Resolver,
               raw: dict[str, Any]) -> Planned:
    keys = group.expressions
    if len(keys) != 1 or not isinstance(keys[0], exp.Column):
        raise src.error(group, "GROUP BY one column: the aggregate keeps one result per value of it")
    by = resolver.resolve(keys[0])[1]
    aggregate: dict[str, Any] | None = None
    named: exp.Alias | None = None
    for item in query.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column) and resolver.resolve(node)[1] == by:
            if isinstance(item, exp.Alias) and item.alias != by:
                raise src.error(item, f"{item.sql()!r}: the group is the output's key (`key`): "
                                      f"it keeps its name")
            continue
        if isinstance(node, exp.Column):
            raise src.error(node, f"{node.sql()!r} is not the GROUP BY column ({by}): select the "
                                  f"GROUP BY column and one aggregate")
        if aggregate is not None:
            raise src.error(node, f"{node.sql()!r}: select the GROUP BY column and one aggregate")
        aggregate = _function(src, node, resolver)
        named = item if isinstance(item, exp.Alias) else None
    if aggregate is None:
        raise src.error(query, "select an aggregate: COUNT(*) or SUM(column)")
    planned = Planned({"operator": "table_aggregate", **raw, "group_by": by, "aggregate": aggregate},
                      {"group_by": src.at(group), "aggregate": src.at(query)})
    if named is not None and named.alias != aggregate["function"]:
        # The operator names the value by its function (`count`, `sum`); AS publishes it so.
        planned.raw["select"] = [{"column": aggregate["function"], "as": named.alias}]
        planned.positions["select.0"] = src.at(named)
    return planned


def _function(src: SqlText, node: exp.Expression, resolver: Resolver) -> dict[str, Any]:
    if isinstance(node, exp.Count) and isinstance(node.this, exp.Star) and not node.args.get("distinct"):
        return {"function": "count"}
    if isinstance(node, exp.Sum) and isinstance(node.this, exp.Column):
        return {"function": "sum", "field": resolver.resolve(node.this)[1]}
    raise src.error(node, f"{node.sql()!r}: the aggregate computes COUNT(*) or SUM(column)")


def _filter(src: SqlText, query: exp.Select, condition: exp.Expression, resolver: Resolver,
            raw: dict[str, Any]) -> Planned:
    while isinstance(condition, exp.Paren):
        condition = condition.this
    negated = isinstance(condition, exp.Not)
    inner = condition.this if negated else condition
    if isinstance(inner, exp.In) and isinstance(inner.this, exp.Column) and inner.expressions:
        column, op = inner.this, "not_in" if negated else "in"
        value: Any = [_literal(src, v) for v in inner.expressions]
    elif isinstance(condition, exp.Is) and isinstance(condition.this, exp.Column) \
            and isinstance(condition.expression, exp.Null):
        column, op, value = condition.this, "eq", None
    elif negated and isinstance(inner, exp.Is) and isinstance(inner.this, exp.Column):
        column, op, value = inner.this, "ne", None
    elif type(condition) in _OPS:
        a, b = condition.this, condition.expression
        if isinstance(a, exp.Column) and not isinstance(b, exp.Column):
            column, op, value = a, _OPS[type(condition)][0], _literal(src, b)
        elif isinstance(b, exp.Column) and not isinstance(a, exp.Column):
            column, op, value = b, _OPS[type(condition)][1], _literal(src, a)
        else:
            raise src.error(condition, f"{condition.sql()!r}: {_FILTER}")
    else:
        raise src.error(condition, f"{condition.sql()!r}: {_FILTER}")
    field = resolver.resolve(column)[1]
    planned = Planned({"operator": "table_filter", **raw,
                       "predicate": {"field": field, "op": op, "value": value}},
                      {"predicate": src.at(condition), "value_columns": src.at(query)})
    _projection(src, query, resolver, planned)
    return planned


def _projection(src: SqlText, query: exp.Select, resolver: Resolver, planned: Planned) -> None:
    """The value columns a filter carries (`value_columns`; all for `*`, the key always comes
    along) and, where `AS` renames one, the names they are published under (`select`)."""
    items = query.expressions
    if len(items) == 1 and isinstance(items[0], exp.Star):
        return
    carried: list[str] = []
    select: list[Any] = []
    for item, name, alias in _value_columns(src, query, resolver, "the filter carries"):
        if name not in carried:
            carried.append(name)
            planned.positions[f"select.{len(select)}"] = src.at(item)
            select.append(name if alias == name else {"column": name, "as": alias})
    planned.raw["value_columns"] = carried
    if any(isinstance(s, dict) for s in select):
        planned.raw["select"] = select


def _map(src: SqlText, query: exp.Select, resolver: Resolver, raw: dict[str, Any]) -> Planned:
    """`SELECT a, b AS c FROM t`: the value columns the map keeps, renamed where AS says; the
    key and the event time come along under their own names."""
    items = query.expressions
    if len(items) == 1 and isinstance(items[0], exp.Star):
        raise src.error(items[0], "a query over one table filters it (WHERE), maps its columns "
                                  "(SELECT a, b AS c) or aggregates it (GROUP BY); SELECT * alone "
                                  "copies a table that is already one of its own")
    columns: list[Any] = [name if alias == name else {"field": name, "as": alias}
                          for _, name, alias in _value_columns(src, query, resolver,
                                                               "the map keeps and renames")]
    if not columns:
        raise src.error(query, "select at least one value column (the key and the event time "
                               "come along anyway)")
    return Planned({"operator": "table_map", **raw, "columns": columns},
                   {"columns": src.at(query)})


def _value_columns(src: SqlText, query: exp.Select, resolver: Resolver,
                   what: str) -> list[tuple[exp.Expression, str, str]]:
    """(item, column, published name) of each value column the list names; the key and the
    event time come along anyway (listed, they are skipped; renamed, refused)."""
    out: list[tuple[exp.Expression, str, str]] = []
    for item in query.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(node, exp.Column):
            raise src.error(node, f"{node.sql()!r}: {what} columns of its input, not expressions")
        rel, name = resolver.resolve(node)
        alias = item.alias if isinstance(item, exp.Alias) else name
        if name in (rel.key, rel.ts):
            if alias != name:
                raise src.error(item, f"{item.sql()!r}: the key and the event time keep their "
                                      f"names (rename them when you read the output table)")
            continue
        out.append((item, name, alias))
    return out


def _literal(src: SqlText, node: exp.Expression) -> Any:
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return -number_literal(node.this)
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else number_literal(node)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    raise src.error(node, f"{node.sql()!r}: compare with a literal (a string, a number, TRUE, "
                          f"FALSE or NULL)")
