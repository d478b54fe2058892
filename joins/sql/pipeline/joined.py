"""A query joining two tables, planned onto the operator its shape names:

- `JOIN t FOR SYSTEM_TIME AS OF s.<event time> ON s.x = t.<key>` -> the stream-table join;
- an ON clause bounding the two event times (`BETWEEN`, `<`, an offset) -> the interval join,
  the condition handed to it with each table called by its source's name;
- `ON l.<key> = r.<key>` -> the table-table join; `ON l.<value column> = r.<key>` -> the
  foreign-key join (KIP-213).

Any other join keeps unbounded state (a stream joined without a time bound, tables joined on
what is not the right table's key) and is refused, as Hazelcast refuses such a query.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from joins.sql.parse import conjuncts
from joins.sql.pipeline.relations import Planned, Relation, Resolver
from joins.sql.pipeline.text import SqlText, offset_of

UNBOUNDED = ("a join without a time bound or a FOR SYSTEM_TIME AS OF clause has unbounded state; "
             "join a stream to a versioned table with `JOIN t FOR SYSTEM_TIME AS OF s.<event time> "
             "ON s.<column> = t.<key>`, two streams within time bounds with `AND l.ts BETWEEN r.ts - "
             "INTERVAL ... AND r.ts + INTERVAL ...`, or two tables on the right table's primary key")
_TIME_RELATIONS = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)


def join_type(src: SqlText, join: exp.Join, allowed: dict[str, str], operator: str) -> str:
    """The join's type as the spec names it (`allowed`: SQL word -> spec value)."""
    side = (join.side or "").upper()
    word = side or "INNER"
    if word not in allowed:
        raise src.error(join.this, f"{word} JOIN: the {operator} is {' | '.join(allowed)}")
    return allowed[word]


def plan_join(src: SqlText, left: Relation, right: Relation, join: exp.Join) -> Planned:
    kind = (join.kind or "").upper()
    if str(join.args.get("method") or "").upper() == "ASOF":
        raise src.error(join.this, "ASOF JOIN: an as-of join is written `JOIN t FOR SYSTEM_TIME AS "
                                   "OF s.<event time> ON s.<column> = t.<key>` (Flink's event-time "
                                   "temporal join)")
    using = join.args.get("using")
    if using:
        # Written out, the same join may well plan (a key equality, a FOR SYSTEM_TIME AS OF).
        names = [u.name for u in using]
        example = " AND ".join(f"{left.alias}.{n} = {right.alias}.{n}" for n in names)
        raise src.error(join.this, f"USING ({', '.join(names)}): write the join's condition out, "
                                   f"`ON {example}`, so that each side's column is named")
    if join.args.get("method") or kind == "CROSS":
        raise src.error(join.this, f"{kind or join.args.get('method') or 'USING'} join: {UNBOUNDED}")
    if kind not in ("", "INNER", "OUTER"):
        raise src.error(join.this, f"{join.side or ''} {kind} JOIN: no operator runs it (a "
                                   f"pipeline joins INNER, LEFT, RIGHT or FULL)".lstrip())
    on = join.args.get("on")
    if left.node.args.get("version") is not None:
        raise src.error(left.node, "FOR SYSTEM_TIME AS OF belongs to the versioned table, the "
                                   "right side of the JOIN")
    if on is None:
        raise src.error(join.this, UNBOUNDED)
    resolver = Resolver(src, (left, right))
    if right.node.args.get("version") is not None:
        return _stream_table(src, left, right, join, on, resolver)
    parts = conjuncts(on)
    if any(_bounds_times(part, resolver) for part in parts):
        return _interval(src, left, right, join, on, resolver)
    return _tables(src, left, right, join, parts, resolver)


def _equality(src: SqlText, parts: list[exp.Expression], resolver: Resolver, left: Relation,
              right: Relation, what: str) -> tuple[str, str]:
    """(left column, right column) of the one `l.x = r.y` the ON clause must be."""
    if len(parts) != 1 or not isinstance(parts[0], exp.EQ) or not all(
            isinstance(n, exp.Column) for n in (parts[0].this, parts[0].expression)):
        bad = next((p for p in parts if not isinstance(p, exp.EQ)), parts[-1])
        raise src.error(bad, f"{bad.sql()!r}: {what} is one equality of a column of each table "
                             f"(`l.column = r.key`)")
    a, b = (resolver.resolve(c) for c in (parts[0].this, parts[0].expression))
    if a[0] is right and b[0] is left:
        a, b = b, a
    if a[0] is not left or b[0] is not right:
        raise src.error(parts[0], f"{parts[0].sql()!r}: compare a column of {left.alias!r} with "
                                  f"a column of {right.alias!r}")
    return a[1], b[1]


def _stream_table(src: SqlText, stream: Relation, table: Relation, join: exp.Join,
                  on: exp.Expression, resolver: Resolver) -> Planned:
    version = table.node.args["version"]
    if not _says_system_time(src, table, version) or version.args.get("kind") != "AS OF":
        raise src.error(version, f"{version.sql()!r}: the stream-table join reads the table FOR "
                                 f"SYSTEM_TIME AS OF the stream's event time")
    at = version.expression
    if not isinstance(at, exp.Column) or resolver.resolve(at) != (stream, stream.ts):
        raise src.error(at, f"FOR SYSTEM_TIME AS OF {at.sql()}: the table is read as of the "
                            f"stream's event time, `{stream.alias}.{stream.ts}` (an event-time "
                            f"temporal join)")
    how = join_type(src, join, {"INNER": "inner", "LEFT": "left"}, "stream-table join")
    column, key = _equality(src, conjuncts(on), resolver, stream, table,
                            "the ON clause of a stream-table join")
    if key != table.key:
        raise src.error(on, f"{on.sql()!r}: the stream-table join looks the table up by its "
                            f"primary key {table.key!r}; {UNBOUNDED}")
    stream_ref: dict[str, Any] = {"source": stream.name}
    if column != stream.key:
        stream_ref["key_columns"] = [column]
    planned = Planned({"operator": "stream_table_join", "stream": stream_ref,
                       "table": {"source": table.name}, "join": how},
                      {"stream": src.at(stream.node), "table": src.at(table.node),
                       "join": src.at(join.this), "history_retention_ms": src.at(table.node)})
    planned.side(table, {"history_retention_ms": ("history_retention_ms",)})
    planned.side(stream, {})
    return planned


def _says_system_time(src: SqlText, table: Relation, version: exp.Expression) -> bool:
    """sqlglot reads `FOR SYSTEM_TIME AS OF` and Spark's time travel `TIMESTAMP AS OF` into the
    same node: only the text between the table's name and the time tells them apart."""
    start, end = offset_of(table.node), offset_of(version)
    return start is not None and end is not None and "SYSTEM_TIME" in src.text[start:end].upper()


def _bounds_times(part: exp.Expression, resolver: Resolver) -> bool:
    """Does `part` compare the two tables other than by a bare equality (a time bound)?"""
    tables = {resolver.resolve(c)[0].alias for c in part.find_all(exp.Column)}
    if len(tables) < 2:
        return False
    # Inside an OR too: the interval join's own analysis refuses a disjunction, and says why.
    return any(isinstance(n, _TIME_RELATIONS) or (isinstance(n, exp.EQ) and not all(
        isinstance(c, exp.Column) for c in (n.this, n.expression))) for n in part.walk())


def _interval(src: SqlText, left: Relation, right: Relation, join: exp.Join,
              on: exp.Expression, resolver: Resolver) -> Planned:
    how = join_type(src, join, {"INNER": "inner", "LEFT": "left", "RIGHT": "right",
                                "FULL": "full"}, "interval join")
    condition = on.copy()
    for column in list(condition.find_all(exp.Column)):
        rel, name = resolver.resolve(column)
        column.replace(exp.column(name, table=rel.name))
    planned = Planned({"operator": "interval_join", "left": {"source": left.name},
                       "right": {"source": right.name}, "condition": condition.sql(),
                       "join": how},
                      {"left": src.at(left.node), "right": src.at(right.node),
                       "condition": src.at(on), "join": src.at(join.this),
                       "left_lag_ms": src.at(left.node), "right_lag_ms": src.at(right.node)})
    planned.side(left, {"lag_ms": ("left_lag_ms",)})
    planned.side(right, {"lag_ms": ("right_lag_ms",)})
    return planned


def _tables(src: SqlText, left: Relation, right: Relation, join: exp.Join,
            parts: list[exp.Expression], resolver: Resolver) -> Planned:
    column, key = _equality(src, parts, resolver, left, right, "a join of two tables")
    if key != right.key:
        raise src.error(parts[0], f"{parts[0].sql()!r}: {right.alias}.{key} is not the primary key "
                                  f"of {right.name!r} ({right.key}); {UNBOUNDED}")
    if column == left.key:
        how = join_type(src, join, {"INNER": "inner", "LEFT": "left", "FULL": "outer"},
                        "table-table join")
        raw: dict[str, Any] = {"operator": "table_table_join"}
    else:
        how = join_type(src, join, {"INNER": "inner", "LEFT": "left"},
                        "foreign-key join (it has no outer form)")
        raw = {"operator": "fk_join", "foreign_key": column}
    raw |= {"left": {"source": left.name}, "right": {"source": right.name}, "join": how}
    planned = Planned(raw, {"left": src.at(left.node), "right": src.at(right.node),
                            "join": src.at(join.this), "foreign_key": src.at(parts[0])})
    for role, rel in (("left", left), ("right", right)):
        planned.side(rel, {k: (role, k) for k in ("versioned", "history_retention_ms")})
    return planned
