"""The batch form of the foreign-key join: its full temporal history (what the join result was
at every point of event time, per left key), from both changelogs.

- **Each side's versions.** Every update a side's store took is a version at its ts (on a
  versioned side the expired ones are not: `joins.changelog`'s prefix scan, exactly as in the
  micro-batches); of two updates of a key at one ts the later arrival wins. A version holds
  until the key's next version: `[from, to)`, `to` null while it still holds. Out-of-order
  updates ARE versions: they are what the incremental join ignores and the history keeps.
- **The join.** A left version that holds a value whose foreign key is `f` meets every version
  of right key `f` that overlaps it (an equi-join on the foreign key and an overlap filter);
  before `f`'s first version the right side is absent, and a foreign key with no right
  version at all is absent throughout. Each overlap is a history row
  `[max(froms), min(tos))` holding `[left, right]` (inner: only where the right row is
  present; left: also `[left, null]`, and for a null foreign key). A left tombstone holds no
  result.

So `get(key, t)` on the history is the join of both sides' latest-by-timestamp values at t:
what the incremental join holds as its current result when both sides are versioned and no
update arrived beyond retention (`backfill.latest_agreement`). The history's timestamps are
when each result held, not Kafka's emission timestamps (`docs/fk_join.md`).

Cost: one shuffle per side to cut versions into intervals, and the join of left intervals with
the right intervals of their foreign key: a right key with many versions and many left rows
pairs them all before the overlap filter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.changelog.history import stored_updates
from joins.changelog.result import VALID_FROM, VALID_TO
from joins.operators.fk_join.columns import EVENT_DATE, FkColumns, Side, has

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from joins.operators.fk_join.spec import FkJoinSpec

_K, _F, _T, _N, _P, _V, _FK = "_k", "_from", "_to", "_next", "_present", "_value", "_fkv"
_BEFORE_ALL = -(1 << 62)   # the start of a right key's "absent" interval before its first version


def _intervals(changelog: DataFrame, side: Side, spec: FkJoinSpec, cols: FkColumns) -> DataFrame:
    """One row per version of `side`: `_k`, `_from`, `_to`, `_present`, `_value` (the value
    struct), and on the left `_fkv` (the foreign key)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    c = cols.changelog(side)
    s = spec.left if side == "left" else spec.right
    stored = stored_updates(changelog, c, s.retention_ms if s.versioned else None)
    payload = [(~F.col(c.tombstone)).alias(_P),
               F.struct(*(F.col(v).alias(v) for v in cols.values(side))).alias(_V)]
    if side == "left":
        payload.append(F.when(~F.col(c.tombstone), F.col(cols.foreign_key)).alias(_FK))
    # The later arrival of two updates at one ts replaces the earlier.
    versions = (stored.groupBy(F.col(c.key).alias(_K), F.col(c.ts).cast("long").alias(_F))
                .agg(F.max_by(F.struct(*payload), F.col(c.seq)).alias("_w"))
                .select(_K, _F, "_w.*"))
    by_key = Window.partitionBy(_K).orderBy(_F)
    return versions.withColumn(_T, F.lead(_F).over(by_key))


def temporal_history(left: DataFrame, right: DataFrame, spec: FkJoinSpec,
                     cols: FkColumns) -> DataFrame:
    """The history rows: key, `left_<v>`.., `right_<v>`.., has_left, has_right, valid_from,
    valid_to, event_date (of valid_from). `left` / `right`: the two changelogs."""
    from pyspark.sql import functions as F

    from joins.spark.exprs import event_date

    li = _intervals(left, "left", spec, cols).where(F.col(_P))
    ri = _intervals(right, "right", spec, cols)
    first = ri.groupBy(_K).agg(F.min(_F).alias("_first"))
    absent_before = first.select(
        _K, F.lit(_BEFORE_ALL).cast("long").alias(_F), F.col("_first").alias(_T),
        F.lit(False).alias(_P), F.lit(None).cast(ri.schema[_V].dataType).alias(_V))
    rights = ri.unionByName(absent_before).select(
        F.col(_K).alias("_rk"), F.col(_F).alias("_rf"), F.col(_T).alias("_rt"),
        F.col(_P).alias("_rp"), F.col(_V).alias("_rv"))
    overlaps = ((F.col(_FK) == F.col("_rk"))
                & (F.col(_T).isNull() | (F.col("_rf") < F.col(_T)))
                & (F.col("_rt").isNull() | (F.col("_rt") > F.col(_F))))
    pairs = li.join(rights, overlaps, "left")
    # No right version overlaps (a null FK, or an FK with no right version): absent throughout.
    starts = F.greatest(F.col(_F), F.coalesce(F.col("_rf"), F.col(_F)))
    ends = F.when(F.col(_T).isNull(), F.col("_rt")).when(F.col("_rt").isNull(), F.col(_T)) \
        .otherwise(F.least(F.col(_T), F.col("_rt")))
    ends = F.when(F.col("_rk").isNull(), F.col(_T)).otherwise(ends)
    right_present = F.coalesce(F.col("_rp"), F.lit(False))
    exists = right_present if spec.join == "inner" else F.lit(True)
    out = [F.col(_K).alias(cols.key),
           *(F.col(f"{_V}.{v}").alias(cols.out("left", v)) for v in cols.left_values),
           *(F.when(right_present, F.col(f"_rv.{v}")).alias(cols.out("right", v))
             for v in cols.right_values),
           F.lit(True).alias(has("left")), right_present.alias(has("right")),
           starts.alias(VALID_FROM), ends.alias(VALID_TO), event_date(starts).alias(EVENT_DATE)]
    return pairs.where(exists).select(*out)
