"""A SQL pipeline file planned onto the project's operators: the settings a YAML spec file
would hold (sources named by reference), so that a `.sql` file and its YAML twin become the
same pipeline spec through the same validation (`joins.pipeline.files`).

    SET 'start_date' = '2024-03-01';                  -- pipeline settings, YAML's keys
    SET 'rates.history_retention_ms' = '86400000';    -- a table's settings: <table>.<key>
    INSERT INTO orders_with_rates                     -- the name (else SET 'name', else the file's)
    SELECT * FROM orders AS o
    LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;

Sources are the folder's `kind: source` files (a SQL file declares none). What the query says
(operator, sources, join type, condition, predicate, grouping) cannot be set as an option.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from joins.errors import ConfigError
from joins.pipeline.shared import SharedSource
from joins.spec import did_you_mean
from joins.sql.pipeline.joined import plan_join
from joins.sql.pipeline.projection import join_select
from joins.sql.pipeline.relations import (
    Planned,
    Relation,
    Resolver,
    from_table,
    plain_select,
    relation_of,
)
from joins.sql.pipeline.single import plan_single
from joins.sql.pipeline.text import (
    Position,
    SqlText,
    Statements,
    split_statements,
    table_options,
)

# Settings the query itself gives.
FROM_QUERY = frozenset({"operator", "stream", "table", "left", "right", "source", "upstream",
                        "condition", "predicate", "group_by", "aggregate", "foreign_key", "join",
                        "table_key", "value_columns", "select"})
_SETTING = re.compile(r"config\.([A-Za-z0-9_.\-]+):")
_MISSING = re.compile(r"config\.([A-Za-z0-9_.\-]+): required setting is missing")


@dataclass(frozen=True)
class SqlPipeline:
    raw: dict[str, Any]                  # what the YAML twin holds
    positions: dict[str, Position]       # setting path -> where the file says it
    options: dict[str, str]              # setting path -> the option that sets it, when not itself

    def locate(self, message: str) -> str:
        """`message` with the line and column before every `config.<path>:` it names, and the
        option to write for a missing setting."""
        message = _MISSING.sub(lambda m: f"{m.group(0)} (SET '{self.options.get(m.group(1), m.group(1))}' "
                                         f"= ...)", message)

        def where(match: re.Match[str]) -> str:
            parts = match.group(1).split(".")
            for n in range(len(parts), 0, -1):
                found = self.positions.get(".".join(parts[:n]))
                if found is not None:
                    return f"line {found[0]}, column {found[1]}, {match.group(0)}"
            # A pipeline setting the file does not give: at the query, which is the pipeline.
            at = self.positions["name"]
            return f"line {at[0]}, column {at[1]}, {match.group(0)}"

        return _SETTING.sub(where, message)


def plan_sql_pipeline(text: str, sources: Mapping[str, SharedSource], *,
                      default_name: str) -> SqlPipeline:
    """The pipeline a SQL file describes; ConfigError at the line and column of what no
    operator can run."""
    statements = split_statements(text)
    src = statements.where
    relations, planned = _plan_query(src, plain_select(src, statements.query), sources)
    options = dict(statements.options)
    for rel in relations:
        for key, given in table_options(src, rel.node, rel.alias).items():
            if key in options or f"{rel.name}.{key.split('.', 1)[1]}" in options:
                raise src.error(rel.node, f"option {key!r} is given by SET and by OPTIONS")
            options[key] = given
    _apply_options(options, planned)
    _upstream_key_and_time(planned)
    _name(src, statements, planned, default_name)
    option_of: dict[str, str] = {}
    for table, settings in planned.side_options.items():   # a table's name comes before its alias
        for setting, path in settings.items():
            option_of.setdefault(".".join(path), f"{table}.{setting}")
    return SqlPipeline(planned.raw, planned.positions, option_of)


def _plan_query(src: SqlText, query: exp.Select, sources: Mapping[str, SharedSource]
                ) -> tuple[list[Relation], Planned]:
    joins = query.args.get("joins") or []
    if len(joins) > 1:
        raise src.error(joins[1].this, "a pipeline joins two inputs (one JOIN); join a third in "
                                       "a pipeline of its own that reads this one by name")
    if not joins:
        rel = relation_of(src, from_table(query), sources, upstream_ok=True)
        if rel.node.args.get("version") is not None:
            raise src.error(rel.node, "FOR SYSTEM_TIME AS OF reads a versioned table in a "
                                      "stream-table join (`FROM s JOIN t FOR SYSTEM_TIME AS OF "
                                      "s.<event time> ON ...`)")
        return [rel], plan_single(src, rel, query)
    left = relation_of(src, from_table(query), sources, upstream_ok=False)
    right = relation_of(src, joins[0].this, sources, upstream_ok=False)
    for clause, word in (("where", "WHERE"), ("group", "GROUP BY")):
        if query.args.get(clause) is not None:
            raise src.error(query.args[clause], f"{word} over a join: a pipeline is one operator; "
                                                f"put a per-table condition in the ON clause "
                                                f"(interval join), or filter or aggregate in a "
                                                f"pipeline that reads this one by name")
    planned = plan_join(src, left, right, joins[0])
    join_select(src, query, Resolver(src, (left, right)), planned)
    return [left, right], planned


def _upstream_key_and_time(planned: Planned) -> None:
    """A query over another pipeline's output may list that output's key (`upstream_key`,
    known once the options are read) and event time (`ts`): they come along anyway, so they
    are no value columns to carry. Renamed, they stay, and the spec's checks refuse them."""
    raw = planned.raw
    if "upstream" not in raw:
        return
    plain = {raw.get("upstream_key", "key"), "ts"}
    for setting, name in (("value_columns", None), ("select", "column"), ("columns", "field")):
        listed = raw.get(setting)
        if listed is None:
            continue
        kept = [(n, c) for n, c in enumerate(listed) if not (
            (isinstance(c, str) and c in plain)
            or (isinstance(c, dict) and c.get(name) in plain and c.get("as") in (None, c.get(name))))]
        raw[setting] = [c for _, c in kept]
        if setting == "select":   # an entry's position follows it
            at = {n: planned.positions.pop(f"select.{n}", None) for n in range(len(listed))}
            planned.positions |= {f"select.{m}": at[n] for m, (n, _) in enumerate(kept)
                                  if at[n] is not None}
    if raw.get("select") is not None and not any(isinstance(c, dict) for c in raw["select"]):
        del raw["select"]   # only the carried columns, under their own names: value_columns says it


def _apply_options(options: dict[str, tuple[Any, Position]], planned: Planned) -> None:
    given: dict[str, str] = {}
    for key, (value, at) in options.items():
        where = f"line {at[0]}, column {at[1]}: option {key!r}"
        if key in FROM_QUERY:
            raise ConfigError(f"{where}: {key!r} is given by the query itself, not by an option")
        if "." in key:
            table, setting = key.split(".", 1)
            sides = planned.side_options.get(table)
            if sides is None:
                known = sorted(planned.side_options)
                raise ConfigError(f"{where}: {table!r} is no table of the query"
                                  f"{did_you_mean(table, known)} (tables: {', '.join(known)})")
            path = sides.get(setting)
            if path is None:
                raise ConfigError(f"{where}: {setting!r} is not a setting of table {table!r} here"
                                  f"{did_you_mean(setting, list(sides))} (its settings: "
                                  f"{', '.join(sides) or 'none'})")
        else:
            path = (key,)
        # A table and its alias, or a table's option and the setting it maps to, are one setting.
        dotted = ".".join(path)
        if dotted in given:
            raise ConfigError(f"{where}: sets what option {given[dotted]!r} set already")
        given[dotted] = key
        target = planned.raw
        for step in path[:-1]:
            target = target.setdefault(step, {})
        target[path[-1]] = value
        planned.positions[".".join(path)] = at


def _name(src: SqlText, statements: Statements, planned: Planned, default_name: str) -> None:
    given = planned.raw.get("name")
    if statements.sink is not None:
        if given is not None and given != statements.sink:
            raise src.error(statements.query, f"INSERT INTO {statements.sink} and SET 'name' = "
                                              f"{given!r} name the pipeline twice")
        planned.raw["name"] = statements.sink
        planned.positions["name"] = statements.sink_at or src.at(statements.query)
    planned.raw.setdefault("name", default_name)
    planned.positions.setdefault("name", src.at(statements.query))
    ordered = {"operator": planned.raw.pop("operator"), "name": planned.raw.pop("name")}
    planned.raw = ordered | planned.raw
