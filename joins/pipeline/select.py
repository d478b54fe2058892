"""A pipeline's `select`: which of its operator's value columns the output publishes, and under
what names (SQL's column list and `AS`), checked against the operator's value columns when the
spec is loaded. The runtime applies it (`joins.incremental.projection`).

    select: [order_id, amount, {column: table_rate, as: rate}]

Without `select` the output holds every column the operator writes. The key, the event time
and the operator's lineage are no value columns: they always come along under their own names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import Field, StrictStr, model_validator

from joins.incremental.projection import OutputValue, Projection
from joins.spec import Spec, did_you_mean

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class SelectedColumn(Spec):
    """One published value column: the operator's `column`, named `as` (default: its own name)."""

    column: StrictStr
    as_: StrictStr | None = Field(default=None, alias="as")

    @property
    def name(self) -> str:
        return self.as_ if self.as_ is not None else self.column

    @model_validator(mode="before")
    @classmethod
    def _as_only_when_renamed(cls, raw: Any) -> Any:
        # `{column: x, as: x}` is `x`: one spec, however it is written.
        if isinstance(raw, dict) and raw.get("as") is not None and raw.get("as") == raw.get("column"):
            return {k: v for k, v in raw.items() if k != "as"}
        return raw


def select_shorthand(raw: Any) -> Any:
    """A bare name stands for `{column: name}`."""
    if isinstance(raw, list | tuple):
        return [{"column": c} if isinstance(c, str) else c for c in raw]
    return raw


def select_problem(select: Sequence[SelectedColumn], values: Sequence[OutputValue],
                   kept: Sequence[str]) -> tuple[str, str] | None:
    """(setting path, message) of the first entry that cannot be published; None: all can.
    `kept`: the output's other columns (key, event time, bookkeeping), which keep their names.
    A value column not selected is dropped, so its name is free for another one's `as`."""
    known = [v.name for v in values]
    if not select:
        return "select", "list at least one value column (or leave `select` out to keep them all)"
    names: dict[str, int] = {}
    for n, entry in enumerate(select):
        if entry.column in kept:
            return (f"select.{n}.column", f"{entry.column!r} is the output's key or event time: "
                    f"it comes along under its own name; select value columns only")
        if entry.column not in known:
            return (f"select.{n}.column", f"{entry.column!r} is not a value column of the output"
                    f"{did_you_mean(entry.column, known)} (its value columns: {', '.join(known)})")
        if not _NAME.match(entry.name):
            return (f"select.{n}.as", f"{entry.name!r} is not a column name (letters, digits and "
                    f"_, starting with a letter: a leading _ is the operator's lineage)")
        if entry.name in names:
            return (f"select.{n}", f"two columns are published as {entry.name!r} (entries "
                    f"{names[entry.name]} and {n}); give one of them another `as`")
        if entry.name in kept:
            return (f"select.{n}.as", f"{entry.name!r} is a column the operator writes itself; "
                    f"choose another name")
        names[entry.name] = n
    return None


def projection_of(select: Sequence[SelectedColumn], values: Sequence[OutputValue]) -> Projection:
    return Projection(tuple(values), tuple((s.column, s.name) for s in select))


def with_select(settings: dict[str, Any], select: Sequence[SelectedColumn] | None) -> dict[str, Any]:
    """A pipeline's settings as its asset page shows them, with what it publishes."""
    if select is None:
        return settings
    shown = ", ".join(s.column if s.as_ is None else f"{s.column} AS {s.as_}" for s in select)
    return {**settings, "select": shown}
