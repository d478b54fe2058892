"""A SQL pipeline file as statements: its `SET` options and its one query, and the positions
(line, column) that every rejection names.

sqlglot keeps the character offsets of identifiers only; a clause is placed at its first
identifier, so a message points at the table or column a user wrote.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import sqlglot
import yaml
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from joins.core.yaml_text import load_yaml
from joins.errors import ConfigError
from joins.sql.evaluator import interval_ms, number_literal

Position = tuple[int, int]
# Flink quotes a name with `backticks` and escapes a quote in a string by doubling it ('it''s');
# of sqlglot's dialects MySQL's reads both (its default dialect has no backticks, Spark's reads
# 'it''s' as two strings).
DIALECT = "mysql"


def position_at(text: str, offset: int) -> Position:
    """(line, column), both from 1, of a character offset of `text`."""
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def offset_of(node: exp.Expression) -> int | None:
    """The offset of the first identifier (or literal) inside `node`, None if it holds none."""
    starts = [n.meta["start"] for n in node.walk() if "start" in (getattr(n, "_meta", None) or {})]
    return min(starts) if starts else None


@dataclass(frozen=True)
class SqlText:
    """The file's text and where its query starts (the position of a clause without one)."""

    text: str
    query_start: int = 0

    def at(self, node: exp.Expression | None) -> Position:
        offset = offset_of(node) if node is not None else None
        return position_at(self.text, self.query_start if offset is None else offset)

    def error(self, node: exp.Expression | None, message: str) -> ConfigError:
        line, column = self.at(node)
        return ConfigError(f"line {line}, column {column}: {message}")


@dataclass(frozen=True)
class Statements:
    query: exp.Query
    sink: str | None                     # INSERT INTO <sink>: the pipeline's name
    sink_at: Position | None
    options: dict[str, tuple[Any, Position]]
    where: SqlText


def split_statements(text: str) -> Statements:
    """The `SET 'key' = value;` options and the one query (`SELECT ...` or `INSERT INTO name
    SELECT ...`) of a file; ConfigError at the position of anything else."""
    src = SqlText(text)
    try:
        parsed = sqlglot.parse(text, read=DIALECT)
    except (ParseError, TokenError) as exc:
        raise _parse_error(src, exc) from None
    options: dict[str, tuple[Any, Position]] = {}
    query: exp.Query | None = None
    sink: str | None = None
    sink_at: Position | None = None
    for statement in parsed:
        if statement is None or isinstance(statement, exp.Semicolon):
            continue   # an empty statement, or a comment after the last `;` of a line
        if isinstance(statement, exp.Set):
            for item in statement.expressions:
                key, value = _option(src, item)
                if key in options:
                    raise src.error(item, f"option {key!r} is set twice")
                options[key] = (value, src.at(item))
            continue
        target: exp.Expression = statement
        if isinstance(statement, exp.Insert):
            table = statement.this
            if not isinstance(table, exp.Table) or table.args.get("db") or not table.name:
                raise src.error(statement, "INSERT INTO names the pipeline: one plain name")
            sink, sink_at, target = table.name, src.at(table), statement.expression
        if not isinstance(target, exp.Query):
            raise src.error(statement, f"only SET options and one query (SELECT, or INSERT INTO "
                                       f"<name> SELECT) make a pipeline; {_unsupported(statement)}")
        if query is not None:
            raise src.error(statement, "a pipeline file holds one query (one join, filter or "
                                       "aggregate); write the next step as a pipeline of its own "
                                       "that reads this one by name")
        query = target
    if query is None:
        raise ConfigError("line 1, column 1: no query: a SQL pipeline holds one SELECT (or "
                          "INSERT INTO <name> SELECT) over sources declared in the folder")
    start = offset_of(query)
    return Statements(query, sink, sink_at, options, SqlText(text, 0 if start is None else start))


def _parse_error(src: SqlText, exc: ParseError | TokenError) -> ConfigError:
    errors = getattr(exc, "errors", None) or []
    if errors and errors[0].get("line"):
        first = errors[0]
        # sqlglot names a token by its repr; its text is what the user wrote.
        problem = re.sub(r"<Token token_type: [\w.]+, text: (.*?), line: .*?>", r"'\1'",
                         first["description"])
        return ConfigError(f"line {first['line']}, column {first['col']}: not valid SQL ({problem})")
    return ConfigError(f"line 1, column 1: not valid SQL ({str(exc).splitlines()[0]})")


def _unsupported(statement: exp.Expression) -> str:
    words = statement.sql().split()
    if words and words[0].upper() == "CREATE":
        return (f"{' '.join(words[:2])} is not supported: sources are declared in `kind: source` "
                f"YAML files of the folder (docs/sql.md)")
    return f"{words[0] if words else type(statement).__name__} is not supported"


_HINT = re.compile(r"^\s*\+?\s*OPTIONS\s*\(.*\)\s*$", re.I | re.S)


def table_options(src: SqlText, table: exp.Table, name: str) -> dict[str, tuple[Any, Position]]:
    """Flink's dynamic table options, `FROM rates /*+ OPTIONS('history_retention_ms' =
    '86400000') */`, as the options `SET '<name>.<key>'` would give. sqlglot keeps a hint
    after a table as a comment (its `+` dropped), on the table or on its alias."""
    alias = table.args.get("alias")
    comments = [*(table.comments or ()), *((alias.comments or ()) if alias is not None else ())]
    out: dict[str, tuple[Any, Position]] = {}
    for comment in comments:
        if not _HINT.match(comment):
            continue
        try:
            hint = sqlglot.parse_one("SELECT " + comment.strip().lstrip("+"), read=DIALECT)
        except (ParseError, TokenError):
            raise src.error(table, f"/*+{comment}*/: not valid OPTIONS('key' = 'value', ...)") from None
        for item in hint.expressions[0].expressions:
            key, value = _option(src, item)
            if f"{name}.{key}" in out:
                raise src.error(table, f"option {key!r} of {name!r} is given twice")
            out[f"{name}.{key}"] = (value, src.at(table))
    return out


def _option(src: SqlText, item: exp.Expression) -> tuple[str, Any]:
    pair = item.this if isinstance(item, exp.SetItem) else item
    if not isinstance(pair, exp.EQ):
        raise src.error(item, "an option is SET 'key' = value")
    key_node, value_node = pair.this, pair.expression
    if isinstance(key_node, exp.Literal) and key_node.is_string:
        key = key_node.this
    elif isinstance(key_node, exp.Column | exp.Identifier | exp.Dot):
        key = key_node.sql().replace('"', "")
    else:
        raise src.error(item, f"an option's key is a quoted name, got {key_node.sql()}")
    return key, _value(src, value_node)


def _value(src: SqlText, node: exp.Expression) -> Any:
    """An option's value as the YAML file would hold it: numbers, booleans, dates and null
    from their text ('86400000', 'true', '2024-03-01'), an INTERVAL as milliseconds."""
    if isinstance(node, exp.Interval):
        return interval_ms(node)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -number_literal(node.this)
    if isinstance(node, exp.Literal):
        if not node.is_string:
            return number_literal(node)
        try:
            scalar = load_yaml(node.this)
        except yaml.YAMLError:
            return node.this
        return scalar if isinstance(scalar, int | float | bool | dt.date) else node.this
    raise src.error(node, f"an option's value is a literal (a quoted string, a number, TRUE, "
                          f"FALSE, NULL or an INTERVAL), got {node.sql()}")
