"""The versioned table's history narrowed to what a batch's lookups can need.

A micro-batch looks up a few thousand keys; the table may hold years of history. The lookups'
distinct table keys, each with its smallest lookup ts, are broadcast into the history scan (a
broadcast hash join in the scan tasks: no shuffle of history). Per key, the versions at or
below that smallest ts matter only through the last of them (valid at that ts, it carries into
the lookup range), so those collapse to one row per key; the versions above it stay as they
are. What remains is about one row per looked-up key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.operators.stream_table_join.columns import TABLE_KEY, TABLE_PREFIX, JoinColumns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


# The versioned table's sequence columns (joins.operators.versioned_table layout).
SEQ_BATCH = "batch_id"
SEQ_ARRIVAL = "arrival"
_LOW = "_low_ts"
_WIN = "_win"


def table_value_name(col: str) -> str:
    return f"{TABLE_PREFIX}{col}"


def narrow_versions(versions: DataFrame, lookups: DataFrame, *, cols: JoinColumns,
                    value_cols: tuple[str, ...]) -> DataFrame:
    """The versions `lookups` (TABLE_KEY, `cols.ts`) can be answered by, one per (key, ts):
    key, ts, tombstone and the values renamed `table_<col>`."""
    from pyspark.sql import functions as F

    key, ts, tomb = cols.table_key, cols.table_ts, cols.tombstone
    lows = (lookups.where(F.col(TABLE_KEY).isNotNull()).groupBy(TABLE_KEY)
            .agg(F.min(cols.ts).alias(_LOW)))
    payload = [tomb, *value_cols]
    needed = versions.select(key, ts, SEQ_BATCH, SEQ_ARRIVAL, *payload)
    candidates = needed.join(F.broadcast(lows), needed[key] == lows[TABLE_KEY]).drop(TABLE_KEY)
    order = F.struct(F.col(ts), F.col(SEQ_BATCH), F.col(SEQ_ARRIVAL))
    # One aggregate does both jobs: every version at or below the key's smallest lookup ts
    # falls into the group (key, low) and only the last of them (the one valid at `low`)
    # survives; each version above it is its own group (key, ts), where the later sequence of
    # a put repeated at the same ts wins. One scan of the history, one shuffle of candidates.
    group = F.greatest(F.col(ts), F.col(_LOW)).alias("_group_ts")
    winners = (candidates.groupBy(key, group)
               .agg(F.max_by(F.struct(F.col(ts), *(F.col(c) for c in payload)), order).alias(_WIN))
               .select(key, F.col(f"{_WIN}.{ts}").alias(ts),
                       *(F.col(f"{_WIN}.{c}").alias(c) for c in payload)))
    return winners.select(key, ts, tomb, *(F.col(c).alias(table_value_name(c)) for c in value_cols))
