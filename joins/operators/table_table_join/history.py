"""The full temporal history of the primary-key join (the batch form; KIP-914's "Attempt 2").

What the join result was at every point of event time, per key, as intervals
`[valid_from, valid_to)` (`valid_to` null: still valid): the intersection of both sides'
version histories.

- **A side's versions.** Every update of the side's changelog is a version at its ts; of two
  updates of a key at one ts the later arrival wins (an equal ts replaces). On a versioned side
  the updates its store refused (expired: older than the side's stream time minus history
  retention when they arrived; the prefix scan of `joins.changelog`) are no versions, exactly
  as in the micro-batches. Out-of-order updates ARE versions: they are what the incremental
  join ignores and the history keeps. History retention does not cut the history: it limits
  what a store keeps, not what happened. An unversioned side's updates are read by their ts
  too: the history is by event time whatever the materialisation.
- **Intersection.** Both sides' versions of a key, ordered by ts: at each distinct ts the value
  of each side is its last version at or before it (a tombstone: none), the result is
  `[left, right]` when the join type says one exists (inner both, left the left, outer either),
  and it holds until the key's next distinct ts. One window per key, one shuffle; only
  intervals that hold a result are rows.

So `get(key, t)` on the history is the join of both sides' latest-by-timestamp values at t,
which is what the incremental join emits last whenever both sides are versioned and no update
arrived beyond retention.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.changelog.history import stored_updates
from joins.operators.table_table_join.columns import (
    EVENT_DATE,
    SIDES,
    VALID_FROM,
    VALID_TO,
    Side,
    TableTableColumns,
    has,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.table_table_join.spec import TableTableJoinSpec

_KEY, _TS, _SEQ, _SIDE = "_key", "_ts", "_seq", "_side"


def _version(changelog: DataFrame, side: Side, cols: TableTableColumns) -> Column:
    from pyspark.sql import functions as F

    c = cols.changelog(side)
    return F.struct((~F.col(c.tombstone)).alias("present"),
                    F.struct(*(F.col(v).alias(v) for v in cols.values(side))).alias("value"))


def _versions(changelogs: dict[Side, DataFrame], side: Side, spec: TableTableJoinSpec,
              cols: TableTableColumns) -> DataFrame:
    """(_key, _ts, _side, _seq, left, right): one row per stored update of `side`; the other
    side's struct is null."""
    from pyspark.sql import functions as F

    c = cols.changelog(side)
    s = spec.side(side)
    stored = stored_updates(changelogs[side], c, s.retention_ms if s.versioned else None)
    structs = {x: _version(stored, x, cols) if x == side else F.lit(None).cast(
        changelogs[x].select(_version(changelogs[x], x, cols).alias("v")).schema["v"].dataType)
        for x in SIDES}
    return stored.select(
        F.col(c.key).alias(_KEY), F.col(c.ts).cast("long").alias(_TS),
        F.lit(0 if side == "left" else 1).alias(_SIDE), F.col(c.seq).cast("long").alias(_SEQ),
        *(structs[x].alias(x) for x in SIDES))


def _exists(spec: TableTableJoinSpec, left: Column, right: Column) -> Column:
    if spec.join == "inner":
        return left & right
    if spec.join == "left":
        return left
    return left | right


def temporal_history(left: DataFrame, right: DataFrame, spec: TableTableJoinSpec,
                     cols: TableTableColumns) -> DataFrame:
    """The history rows: key, `left_<v>`.., `right_<v>`.., has_left, has_right, valid_from,
    valid_to, event_date (of valid_from). `left` / `right`: the two changelogs."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from joins.spark.exprs import event_date

    changelogs: dict[Side, DataFrame] = {"left": left, "right": right}
    events = _versions(changelogs, "left", spec, cols).unionByName(
        _versions(changelogs, "right", spec, cols))
    by_key = Window.partitionBy(_KEY).orderBy(_TS, _SIDE, _SEQ)
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    current = events.select(
        _KEY, _TS,
        F.last("left", ignorenulls=True).over(upto).alias("lc"),
        F.last("right", ignorenulls=True).over(upto).alias("rc"),
        F.lead(_TS).over(by_key).alias("_next"))
    # The last event of each (key, ts) holds both sides' versions at that ts; its successor's
    # ts is the key's next distinct ts: where the interval ends.
    segments = current.where(F.col("_next").isNull() | (F.col("_next") != F.col(_TS)))
    holds = {s: F.coalesce(F.col(f"{s[0]}c.present"), F.lit(False)) for s in SIDES}
    exists = _exists(spec, holds["left"], holds["right"])
    out: list[Column] = [F.col(_KEY).alias(cols.key)]
    for side in SIDES:
        out += [F.when(holds[side], F.col(f"{side[0]}c.value.{v}")).alias(cols.out(side, v))
                for v in cols.values(side)]
    out += [holds[s].alias(has(s)) for s in SIDES]
    out += [F.col(_TS).alias(VALID_FROM), F.col("_next").alias(VALID_TO),
            event_date(F.col(_TS)).alias(EVENT_DATE)]
    return segments.where(exists).select(*out)
