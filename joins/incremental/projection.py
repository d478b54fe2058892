"""The value columns a join publishes: a pipeline's `select` (SQL's column list and `AS` names)
applied where the runtime writes, so that every operator gets it the same way.

An operator's output holds value columns (the data a user chose to carry: the stream's and the
table's values, `left_*` / `right_*`, an aggregate) and the columns that make it a changelog or
an event stream (keys, event time, lineage, watermark rows). A projection keeps the value
columns it selects, under the names it gives, and drops the other value columns; everything else
passes through unchanged, so checks, backfills and downstream readers that use the operator's
own columns keep working. A value column may have twins that follow it (the filter's
`old_<column>`, the sum's `<column>_int`): they are renamed and dropped with it.

It is applied to the frame a micro-batch writes (before the event times get their `_utc`
twins), to the rows a backfill recomputes (and the identity and compared columns it matches
them by), and to what `joins.reproduce` recomputes: the same function in all three places.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class OutputValue:
    """A value column of an operator's output, and the twins that follow it (templates over
    the column's name: `"old_{}"`)."""

    name: str
    twins: tuple[str, ...] = ()

    def columns(self, name: str | None = None) -> tuple[str, ...]:
        base = self.name if name is None else name
        return (base, *(t.format(base) for t in self.twins))


@dataclass(frozen=True)
class Projection:
    """`selected`: (value column, name it is published under), in the order given."""

    values: tuple[OutputValue, ...]
    selected: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        known = {v.name for v in self.values}
        unknown = [c for c, _ in self.selected if c not in known]
        if unknown:
            raise ConfigError(f"select: {unknown} are not value columns of the output (its value "
                              f"columns: {sorted(known)})")

    def renames(self) -> dict[str, str | None]:
        """Every value column (and twin) -> its published name; None: dropped."""
        chosen = dict(self.selected)
        out: dict[str, str | None] = {}
        for value in self.values:
            new = chosen.get(value.name)
            for old_name, new_name in zip(value.columns(), value.columns(new or value.name), strict=True):
                out[old_name] = new_name if new is not None else None
        return out

    def names(self, columns: Sequence[str]) -> tuple[str, ...]:
        """`columns` as published (renamed, the dropped ones left out): what a backfill matches
        and compares rows by."""
        renames = self.renames()
        published = (renames.get(c, c) for c in columns)
        return tuple(name for name in published if name is not None)

    def apply(self, frame: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        renames = self.renames()
        kept = [(c, renames.get(c, c)) for c in frame.columns if renames.get(c, c) is not None]
        published = [new for _, new in kept]
        clash = sorted({n for n in published if published.count(n) > 1})
        if clash:
            raise ConfigError(f"select: the output would hold {clash} twice (a name given by AS "
                              f"is a column the operator writes itself); choose another name")
        return frame.select(*(F.col(f"`{old}`").alias(str(new)) if old != new else F.col(f"`{old}`")
                              for old, new in kept))


def projected(frame: DataFrame, projection: Projection | None) -> DataFrame:
    return frame if projection is None else projection.apply(frame)
