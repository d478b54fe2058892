"""A held history's window: the part of a versioned table that answers every lookup from some ts
on, for a table too large to hold whole.

Kafka Streams' versioned store (KIP-914) keeps each key's latest version apart from its older
segments, so that the usual lookup, near the present, never reads old history. The window is
that idea with a movable edge: every version at or after `start`, plus, per key, the last
version before it (the one still valid at `start`). A lookup at ts >= `start` finds its answer
among these; one older than `start` needs the history. Versions a later batch adds are merged in
whatever their ts (a late one below `start` may be a key's new last version before it), so the
window stays exact as it grows.

`start` is chosen from the table's statistics so that the window fits a budget of versions:
the key count (one version before `start` each) plus the versions after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.spark.exprs import ident

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Candidate starts, as fractions of the versions (by ts) left out of the window: the earliest
# that fits the budget wins (a wider window answers more lookups).
_FRACTIONS = (0.5, 0.75, 0.875, 0.9375, 0.96875, 0.984375, 0.9921875, 1.0)
_ACCURACY = 10_000


def window_start(history: DataFrame, *, key: str, ts: str, budget: int) -> int | None:
    """The earliest candidate start whose window of `history` holds at most about `budget`
    versions (one Spark job: the row count, an approximate key count and ts percentiles), or
    None when even a window of one version per key would not fit."""
    fractions = ", ".join(str(f) for f in _FRACTIONS)
    row = history.selectExpr(
        "count(1) AS n", f"approx_count_distinct({ident(key)}) AS keys",
        f"percentile_approx({ident(ts)}, array({fractions}), {_ACCURACY}) AS q").first()
    if row is None or not row["n"] or row["q"] is None:
        return None
    rows, keys = int(row["n"]), int(row["keys"])
    for fraction, start in zip(_FRACTIONS, row["q"], strict=True):
        if start is not None and keys + rows * (1 - fraction) <= budget:
            return int(start)
    return None


def window_frame(history: DataFrame, *, key: str, ts: str, sequence: tuple[str, ...],
                 start: int) -> DataFrame:
    """`history`'s window from `start` (its columns, in order): every version at or after it,
    and per key the last one before it, a put repeated at one (key, ts) resolved by the later
    `sequence`, as the versioned store resolves it. A version with a null ts stays in, so that
    the index fails on it as it would on the whole history."""
    k, t = ident(key), ident(ts)
    cols = [ident(c) for c in history.columns]
    order = ", ".join([t, *(ident(c) for c in sequence)])
    query = f"""
        SELECT {", ".join(cols)} FROM {{history}} WHERE {t} >= {start} OR {t} IS NULL
        UNION ALL
        SELECT {", ".join(f"_last.{c}" for c in cols)} FROM (
            SELECT max_by(struct({", ".join(cols)}), struct({order})) AS _last
            FROM {{history}} WHERE {t} < {start} AND {k} IS NOT NULL GROUP BY {k})"""
    return history.sparkSession.sql(query, history=history)
