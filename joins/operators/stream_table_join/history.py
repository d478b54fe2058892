"""The versioned table's history narrowed to what a batch's lookups can need.

A versioned table's history is held in the driver from batch to batch (`held_table`,
`joins.asof.held`): whole up to `joins.asof.HELD_MAX_ROWS` versions, as a window (the versions
from some ts on, and each key's last before it) beyond, and a batch reads only the versions the
table gained. What the held history cannot answer (lookups older than a window's start, a table
whose window would not fit, a session without the JVM index) is narrowed per batch, as follows.

A micro-batch looks up a few thousand keys; the table may hold years of history. The lookups'
distinct table keys, each with its smallest lookup ts, are broadcast into the history scan (a
broadcast hash join in the scan tasks: no shuffle of history). Per key, the versions at or
below that smallest ts matter only through the last of them (valid at that ts, it carries into
the lookup range), so those collapse to one row per key; the versions above it stay as they
are. What remains is about one row per looked-up key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.asof import HeldTable
from joins.operators.stream_table_join.columns import TABLE_KEY, TABLE_PREFIX, JoinColumns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from joins.incremental import StepContext


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
    from joins.spark.exprs import ident

    key, ts, tomb = ident(cols.table_key), ident(cols.table_ts), ident(cols.tombstone)
    payload = [tomb, *(ident(c) for c in value_cols)]
    # One aggregate does both jobs: every version at or below the key's smallest lookup ts
    # falls into the group (key, low) and only the last of them (the one valid at `low`)
    # survives; each version above it is its own group (key, ts), where the later sequence of
    # a put repeated at the same ts wins. One scan of the history, one shuffle of candidates.
    # (One SQL statement: the same plan as DataFrame calls, built in a few JVM round trips.)
    query = f"""
        SELECT {key}, {_WIN}.{ts} AS {ts},
               {", ".join(f"{_WIN}.{p} AS {ident(n)}" for p, n in zip(
                   payload, [cols.tombstone, *(table_value_name(c) for c in value_cols)], strict=True))}
        FROM (
            SELECT /*+ BROADCAST(l) */ v.{key} AS {key},
                   max_by(struct(v.{ts}, {", ".join(f"v.{p}" for p in payload)}),
                          struct(v.{ts}, v.{SEQ_BATCH}, v.{SEQ_ARRIVAL})) AS {_WIN}
            FROM {{versions}} v
            JOIN (SELECT {TABLE_KEY} AS _lookup_key, min({ident(cols.ts)}) AS {_LOW}
                  FROM {{lookups}} WHERE {TABLE_KEY} IS NOT NULL GROUP BY {TABLE_KEY}) l
              ON v.{key} = l._lookup_key
            GROUP BY v.{key}, greatest(v.{ts}, l.{_LOW}))"""
    return versions.sparkSession.sql(query, versions=versions, lookups=lookups)


def held_table(ctx: StepContext, cols: JoinColumns, value_cols: tuple[str, ...],
               schema: StructType, max_rows: int) -> HeldTable:
    """The versioned table of this batch as the held index reads it (`schema`: the table's):
    key, ts, tombstone, the sequence and the values renamed `table_<col>`, a put repeated at
    the same (key, ts) resolved by the later sequence, as the versioned store resolves it."""
    from pyspark.sql import types as T

    from joins.spark.exprs import ident

    own = [cols.table_key, cols.table_ts, cols.tombstone, SEQ_BATCH, SEQ_ARRIVAL]
    columns = [*(ident(c) for c in own),
               *(f"{ident(c)} AS {ident(table_value_name(c))}" for c in value_cols)]
    fields = [*(schema[c] for c in own),
              *(T.StructField(table_value_name(c), schema[c].dataType, True) for c in value_cols)]

    def changes_after(version: int) -> DataFrame | None:
        changes = ctx.changes_after("table", version)
        return None if changes is None else changes.selectExpr(*columns)

    identity = ctx.identity("table")
    # One held history per join (its root): two joins of one table read it at their own pace.
    return HeldTable(holder=f"{ctx.root.root}:table", table_id=identity.id,
                     version=identity.version, rows=identity.rows, schema=T.StructType(fields),
                     history=lambda: ctx.snapshot("table").selectExpr(*columns),
                     changes_after=changes_after, sequence=(SEQ_BATCH, SEQ_ARRIVAL),
                     max_rows=max_rows)
