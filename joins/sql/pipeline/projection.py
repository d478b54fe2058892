"""A join query's column list planned onto the pipeline's `select` (`joins.pipeline.select`):
each `alias.column [AS name]` names a value column of the operator's output, published under
the `AS` name or, as in SQL, the column's own name (`r.rate` is published as `rate`, not as the
operator's `table_rate`).

How a table's column is called in the output is the operator's (`table_` for the stream-table
join's table, `<source>_` for the interval join, `left_` / `right_` for the table joins); the
output's key and event time come along under their own names whether listed or not, and an
`AS` that would rename them is refused. `SELECT *` publishes every column the operator writes.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from joins.sql.pipeline.relations import Planned, Relation, Resolver
from joins.sql.pipeline.text import SqlText

_KEPT = ("comes along under its own name (the output's key and event time keep their names: "
         "rename them when you read the output table)")


def join_select(src: SqlText, query: exp.Select, resolver: Resolver, planned: Planned) -> None:
    """Set `planned.raw["select"]` from the query's column list (nothing for `SELECT *`)."""
    items = query.expressions
    if len(items) == 1 and isinstance(items[0], exp.Star):
        return
    select: list[Any] = []
    for item in items:
        node = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            raise src.error(node, f"{node.sql()!r}: a pipeline publishes columns of the join, "
                                  f"not expressions; list `alias.column [AS name]`, or SELECT *")
        rel, name = resolver.resolve(node)
        column = _output_column(planned.raw, rel, name)
        alias = item.alias if isinstance(item, exp.Alias) else None
        if column is None:
            if alias is not None and alias != name:
                raise src.error(item, f"{item.sql()!r}: {rel.alias}.{name} {_KEPT}")
            continue
        published = alias or name
        planned.positions[f"select.{len(select)}"] = src.at(item)
        select.append(column if published == column else {"column": column, "as": published})
    if not select:
        raise src.error(query, "list at least one value column (the key and the event time come "
                               "along anyway), or SELECT *")
    planned.raw["select"] = select
    planned.positions["select"] = src.at(query)


def _output_column(raw: dict[str, Any], rel: Relation, name: str) -> str | None:
    """The output column `rel.name` is written to; None: the output's key or event time."""
    operator = raw["operator"]
    if name == rel.ts:
        return None
    if operator == "interval_join":
        return f"{rel.name}_{name}"
    if operator == "stream_table_join":
        # The stream is keyed by the column the ON clause compares with the table's key: both
        # are the output's key.
        if rel.name == raw["stream"]["source"]:
            keys = raw["stream"].get("key_columns") or [rel.key]
            return None if name == keys[0] else name
        return None if name == rel.key else f"table_{name}"
    side = "left" if rel.name == raw["left"]["source"] else "right"
    if name == rel.key:
        if side == "right" and operator == "fk_join":
            return f"left_{raw['foreign_key']}"
        return None
    return f"{side}_{name}"
