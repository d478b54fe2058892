"""The tables a pipeline query reads: each a source declared in the folder (`kind: source`) or
the output of another pipeline (read by name, columns unknown here), with its alias; the
resolution of the query's column references to them; and the plan made of them (`Planned`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from joins.pipeline.shared import SharedSource
from joins.spec import did_you_mean
from joins.sql.pipeline.text import Position, SqlText


@dataclass(frozen=True)
class Relation:
    name: str                       # the source's (or upstream pipeline's) name
    alias: str                      # what the query calls it (the name when it has no alias)
    node: exp.Table
    source: SharedSource | None     # None: another pipeline's output

    @property
    def key(self) -> str | None:
        keys = self.source.spec.key_columns if self.source is not None else ()
        return keys[0].name if len(keys) == 1 else None

    @property
    def ts(self) -> str | None:
        return self.source.spec.ts_column if self.source is not None else None

    def columns(self) -> list[str] | None:
        """Every column the query may name (key, values, event time); None when unknown."""
        if self.source is None:
            return None
        spec = self.source.spec
        return [*(c.name for c in (*spec.key_columns, *spec.value_columns)), spec.ts_column]

    def nullable(self, column: str) -> bool:
        spec = self.source.spec if self.source is not None else None
        found = [c for c in spec.value_columns if c.name == column] if spec is not None else []
        return bool(found) and found[0].nullable


@dataclass
class Planned:
    """The settings a YAML file would hold, where the query says each, and how an option named
    after one of its tables (`SET 'rates.history_retention_ms' = ...`) maps onto them."""

    raw: dict[str, Any]
    positions: dict[str, Position] = field(default_factory=dict)
    # table name or alias -> {option: the settings path it sets}
    side_options: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)

    def side(self, rel: Relation, options: dict[str, tuple[str, ...]]) -> None:
        self.side_options[rel.name] = options
        self.side_options[rel.alias] = options


def relation_of(src: SqlText, node: exp.Expression, sources: Mapping[str, SharedSource], *,
                upstream_ok: bool) -> Relation:
    """The table `node` names; a ConfigError at it for a subquery, a qualified name, or (when
    `upstream_ok` is false) a name that is no source of the folder."""
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise src.error(node, f"{node.sql()[:60]!r}: a pipeline reads sources and pipelines by "
                              f"name; a subquery or a table function is not supported (write it "
                              f"as a pipeline of its own and read that by name)")
    if node.args.get("db") or node.args.get("catalog"):
        raise src.error(node, f"{node.sql()!r}: name a source of the folder, without a "
                              f"catalog or database")
    name = node.name
    shared = sources.get(name)
    if shared is None and not upstream_ok:
        known = sorted(sources)
        raise src.error(node, f"no source named {name!r}{did_you_mean(name, known)}; sources "
                              f"defined in the folder: {', '.join(known) or 'none'} (a source "
                              f"file holds `kind: source`)")
    return Relation(name, node.alias_or_name, node, shared)


class Resolver:
    """A column reference of the query -> (its relation, its column name)."""

    def __init__(self, src: SqlText, relations: Sequence[Relation]) -> None:
        self.src = src
        self.relations = relations
        by: dict[str, Relation] = {}
        for rel in relations:
            if rel.alias in by:
                raise src.error(rel.node, f"{rel.alias!r} names two tables of the query; give "
                                          f"one an alias")
            by[rel.alias] = rel
        self.by_alias = by

    def resolve(self, column: exp.Column) -> tuple[Relation, str]:
        if column.args.get("db") or column.args.get("catalog"):
            raise self.src.error(column, f"{column.sql()!r}: a column is `table.column`")
        name, table = column.name, column.table
        if table:
            rel = self.by_alias.get(table)
            if rel is None:
                known = list(self.by_alias)
                raise self.src.error(column, f"{table!r} is no table of the query"
                                             f"{did_you_mean(table, known)} (tables: "
                                             f"{', '.join(known)})")
            self._check(column, rel, name)
            return rel, name
        having = [r for r in self.relations if (r.columns() or [name]).count(name)]
        if len(self.relations) == 1:
            having = list(self.relations)
        if len(having) != 1:
            what = "is in no table" if not having else "is in more than one table"
            raise self.src.error(column, f"column {name!r} {what} of the query; qualify it "
                                         f"(`alias.{name}`)")
        self._check(column, having[0], name)
        return having[0], name

    def _check(self, column: exp.Column, rel: Relation, name: str) -> None:
        known = rel.columns()
        if known is not None and name not in known:
            raise self.src.error(column, f"{rel.name!r} has no column {name!r}"
                                         f"{did_you_mean(name, known)} (its columns: "
                                         f"{', '.join(known)})")


def plain_select(src: SqlText, query: exp.Expression) -> exp.Select:
    """`query` as one SELECT without the clauses no operator has; ConfigError at the clause."""
    if not isinstance(query, exp.Select):
        raise src.error(query, f"{type(query).__name__.upper()}: a pipeline is one SELECT "
                               f"(one join, filter or aggregate)")
    refused = {"with_": "WITH (a common table expression)", "with": "WITH (a common table expression)",
               "distinct": "DISTINCT", "having": "HAVING", "order": "ORDER BY",
               "limit": "LIMIT", "offset": "OFFSET", "qualify": "QUALIFY",
               "windows": "WINDOW", "laterals": "LATERAL", "pivots": "PIVOT",
               "sort": "SORT BY", "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY"}
    for key, clause in refused.items():
        value = query.args.get(key)
        if value:
            node = value[0] if isinstance(value, list) else value
            raise src.error(node, f"{clause} is not supported: the output of a continuous "
                                  f"pipeline is every row it produces, kept up to date (query "
                                  f"the output table for it)")
    if query.args.get("hint") is not None:
        raise src.error(None, f"the query hint {query.args['hint'].sql()} is not "
                                            f"supported: options are SET 'key' = value, or a "
                                            f"table's /*+ OPTIONS(...) */")
    for node in query.walk():
        if isinstance(node, exp.Window):
            raise src.error(node, f"a window function ({node.sql()}) is not supported: no "
                                  f"operator computes it")
        if node is not query and isinstance(node, exp.Query):
            raise src.error(node, "a subquery is not supported: write it as a pipeline of its "
                                  "own and read that by name")
    if query.args.get("from_") is None and query.args.get("from") is None:
        raise src.error(query, "a pipeline query reads FROM a source")
    return query


def from_table(query: exp.Select) -> exp.Expression:
    clause = query.args.get("from_") or query.args.get("from")
    assert clause is not None
    return clause.this


def refuse_column_values(src: SqlText, nodes: Sequence[exp.Expression], what: str) -> None:
    """ConfigError at the first of `nodes` that is not a plain column."""
    for node in nodes:
        if not isinstance(node, exp.Column):
            raise src.error(node, f"{node.sql()!r}: {what}")
