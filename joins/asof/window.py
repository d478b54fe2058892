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

Reading a window is a process's one slow batch (the second, for a table of millions of
versions), so both of its jobs are shaped for it: the ts percentiles come from a fixed sample
of a large table's rows (on 10M versions the job took 3-4 s warm and 10 s as a process's
first, feeding every row to the percentile sketch; 1.8 s and 4.3 s with a 1/64 sample), and
each key's last version before `start` is a ranked window, not `max_by` of a struct (Spark
cannot hash-aggregate a struct, so it sorted the rows twice: 5.8-6.9 s against 4.4-4.9 s).
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
# Tables of at least this many rows take their ts percentiles from one row in SAMPLE_EVERY
# (chosen by a hash of key and ts, so the same table gives the same start): 15k rows of a 1M
# table place a percentile within about 0.2 % of the ranks, well inside the budget's half of
# headroom, and a start only decides what is held, never an answer.
SAMPLE_MIN_ROWS = 1_000_000
SAMPLE_EVERY = 64
# The rank's column, named so that no table column is taken for it.
_RANK = "_tj_window_rank"


def window_start(history: DataFrame, *, key: str, ts: str, budget: int,
                 rows: int | None = None) -> int | None:
    """The earliest candidate start whose window of `history` holds at most about `budget`
    versions (one Spark job: the row count, an approximate key count and ts percentiles), or
    None when even a window of one version per key would not fit. `rows`, the table's row
    count when known beforehand (its Delta statistics), decides whether percentiles are
    sampled."""
    k, t = ident(key), ident(ts)
    fractions = ", ".join(str(f) for f in _FRACTIONS)
    sampling = rows is not None and rows >= SAMPLE_MIN_ROWS
    sampled = f"CASE WHEN pmod(xxhash64({k}, {t}), {SAMPLE_EVERY}) = 0 THEN {t} END" if sampling else t
    row = history.selectExpr(
        "count(1) AS n", f"approx_count_distinct({k}) AS keys",
        f"percentile_approx({sampled}, array({fractions}), {_ACCURACY}) AS q").first()
    if sampling and row is not None and row["n"] and row["q"] is None:
        # The hint was off (no sampled row had a ts): ask again without sampling.
        return window_start(history, key=key, ts=ts, budget=budget)
    if row is None or not row["n"] or row["q"] is None:
        return None
    n, keys = int(row["n"]), int(row["keys"])
    for fraction, start in zip(_FRACTIONS, row["q"], strict=True):
        if start is not None and keys + n * (1 - fraction) <= budget:
            return int(start)
    return None


def window_frame(history: DataFrame, *, key: str, ts: str, sequence: tuple[str, ...],
                 start: int) -> DataFrame:
    """`history`'s window from `start` (its columns, in order): every version at or after it,
    and per key the last one before it, a put repeated at one (key, ts) resolved by the later
    `sequence`, as the versioned store resolves it. A version with a null ts stays in, so that
    the index fails on it as it would on the whole history."""
    k, t = ident(key), ident(ts)
    cols = ", ".join(ident(c) for c in history.columns)
    latest_first = ", ".join(f"{c} DESC" for c in [t, *(ident(c) for c in sequence)])
    query = f"""
        SELECT {cols} FROM {{history}} WHERE {t} >= {start} OR {t} IS NULL
        UNION ALL
        SELECT {cols} FROM (
            SELECT *, row_number() OVER (PARTITION BY {k} ORDER BY {latest_first}) AS {_RANK}
            FROM {{history}} WHERE {t} < {start} AND {k} IS NOT NULL)
        WHERE {_RANK} = 1"""
    return history.sparkSession.sql(query, history=history)
