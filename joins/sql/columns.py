"""Which input a column reference of a join condition belongs to, and what its watermark is called.

Rows are JSON objects whose keys are the names listed in `left_columns` / `right_columns`. A name
may itself be qualified (`"o.time"`), which is how the output of one join feeds another (seed
003's join2 reads rows carrying both `o.time` and `d.time` on its left input).

A column reference `t.c` in the condition resolves as follows:
- `"t.c"` is a column of a side: that column (qualified names win);
- `t` is an alias of a side and `c` is a column of it. Aliases: `l` (left) and `r` (right); the
  prefix of every qualified column name (`o` for `"o.time"`); and any other alias is bound to
  the one side holding every column referenced through it (`o.order_time`, `o.order_id` with
  `order_time` only on the left bind `o` to the left);
- an unqualified `c` must be a column of exactly one side.
Anything unknown or ambiguous is a ConfigError naming the reference.

Watermark names: a watermark is named by its column as listed in the side's columns; where both
sides list the same name, the output watermark is qualified by the side (`l.time`, `r.time`), as
in seed 003's edge-case examples. An input watermark may use either form.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from joins.errors import ConfigError

Side = Literal["left", "right"]
SIDES: tuple[Side, Side] = ("left", "right")
SIDE_ALIAS: dict[Side, str] = {"left": "l", "right": "r"}


def other_side(side: Side) -> Side:
    return "right" if side == "left" else "left"


@dataclass(frozen=True, order=True)
class ColumnRef:
    """A column of one input: `name` is the row key, exactly as in `left_columns`/`right_columns`."""

    side: Side
    name: str

    def __str__(self) -> str:
        return f"{self.side}.{self.name}"


@dataclass(frozen=True)
class Schema:
    """The two inputs' column names, in the order the config lists them."""

    left_columns: tuple[str, ...]
    right_columns: tuple[str, ...]

    def columns(self, side: Side) -> tuple[str, ...]:
        return self.left_columns if side == "left" else self.right_columns

    def position(self, ref: ColumnRef) -> tuple[int, int]:
        """Sort key: left columns first, each side in config order."""
        return (0 if ref.side == "left" else 1, self.columns(ref.side).index(ref.name))

    def ordered(self, refs: Iterable[ColumnRef]) -> list[ColumnRef]:
        return sorted(set(refs), key=self.position)

    def watermark_name(self, ref: ColumnRef) -> str:
        """The output watermark's name: the column name, side-qualified when both sides list it."""
        if ref.name in self.columns(other_side(ref.side)):
            return f"{SIDE_ALIAS[ref.side]}.{ref.name}"
        return ref.name

    def watermark_column(self, side: Side, name: str) -> ColumnRef | None:
        """The column an input watermark of `side` names (plain or side-qualified), or None."""
        if name in self.columns(side):
            return ColumnRef(side, name)
        prefix = f"{SIDE_ALIAS[side]}."
        if name.startswith(prefix) and name[len(prefix):] in self.columns(side):
            return ColumnRef(side, name[len(prefix):])
        return None

    def ref_of_watermark_name(self, name: str) -> ColumnRef:
        """Inverse of `watermark_name` (snapshots key their watermark maps by that name)."""
        for side in SIDES:
            for column in self.columns(side):
                ref = ColumnRef(side, column)
                if self.watermark_name(ref) == name:
                    return ref
        raise KeyError(name)


def _describe_columns(schema: Schema) -> str:
    return f"left_columns {list(schema.left_columns)}, right_columns {list(schema.right_columns)}"


@dataclass
class ColumnResolver:
    """Resolves the column references of one condition against a schema (see module docstring)."""

    schema: Schema
    aliases: dict[str, set[Side]] = field(default_factory=dict)

    @classmethod
    def for_condition(cls, schema: Schema, condition: exp.Expression) -> ColumnResolver:
        resolver = cls(schema)
        for side in SIDES:
            resolver.aliases.setdefault(SIDE_ALIAS[side], set()).add(side)
            for name in schema.columns(side):
                if "." in name:
                    resolver.aliases.setdefault(name.split(".", 1)[0], set()).add(side)
        resolver._bind_other_aliases(condition.find_all(exp.Column))
        return resolver

    def _bind_other_aliases(self, columns: Iterable[exp.Column]) -> None:
        # An alias used in SQL text but not named by the config (`o` in `o.order_time` where the
        # column is listed as `order_time`) belongs to the one side holding all its columns.
        used: dict[str, set[str]] = {}
        for column in columns:
            _check_parts(column)
            if column.table and column.table not in self.aliases:
                used.setdefault(column.table, set()).add(column.name)
        for alias, names in used.items():
            sides = [s for s in SIDES if names <= set(self.schema.columns(s))]
            if len(sides) == 1:
                self.aliases[alias] = {sides[0]}
            elif not sides:
                raise ConfigError(
                    f"condition: unknown alias '{alias}': no input has all of the columns "
                    f"{sorted(names)} referenced through it ({_describe_columns(self.schema)})")
            else:
                raise ConfigError(
                    f"condition: alias '{alias}' is ambiguous: both inputs have the columns "
                    f"{sorted(names)}; use l.<column> / r.<column> or qualified column names")

    def resolve(self, column: exp.Column) -> ColumnRef:
        _check_parts(column)
        table, name = column.table, column.name
        candidates: list[ColumnRef] = []
        for side in SIDES:
            columns = self.schema.columns(side)
            if table and f"{table}.{name}" in columns:
                candidates.append(ColumnRef(side, f"{table}.{name}"))
            elif name in columns and (not table or side in self.aliases.get(table, set())):
                candidates.append(ColumnRef(side, name))
        text = column.sql()
        if not candidates:
            raise ConfigError(f"condition: unknown column {text} ({_describe_columns(self.schema)})")
        if len(candidates) > 1:
            raise ConfigError(
                f"condition: column {text} is ambiguous: it names "
                f"{' and '.join(str(c) for c in candidates)}; qualify it with l. or r.")
        return candidates[0]

    def sides_of(self, expression: exp.Expression) -> set[Side]:
        return {self.resolve(c).side for c in expression.find_all(exp.Column)}


def _check_parts(column: exp.Column) -> None:
    if column.args.get("db") is not None or column.args.get("catalog") is not None:
        raise ConfigError(f"condition: column reference {column.sql()} has too many parts; "
                          f"use alias.column (quote a qualified column name: \"o.time\")")


def validate_column_list(names: Sequence[str], key: str) -> None:
    """Non-empty, unique, non-blank names; the message names the config key."""
    if not names:
        raise ValueError(f"{key} must list at least one column")
    seen: set[str] = set()
    for name in names:
        if not name.strip():
            raise ValueError(f"{key} holds a blank column name")
        if name in seen:
            raise ValueError(f"{key} lists column '{name}' twice")
        seen.add(name)
