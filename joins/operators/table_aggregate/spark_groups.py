"""The groups a batch of the table aggregate touched, and their values after it.

A group's compacted output of a batch is its last emission: the aggregate of its members after
the batch (0, or "" for concat, when it has none: Kafka's subtractor result), with ts = max(the
group's previous output ts, the ts of every update that touched it in the batch), as Kafka's
KTableAggregate keeps group time from going back. Emission order: by the arrival index of the
last touching update, a key's old group before its new one.

- `count` is kept as a running count per group (`groups` state): the batch adds the keys that
  came in and subtracts those that left; nothing else is read.
- `sum` and `concat` are computed from the members, in the order of their input keys (the
  reference's rule: a float sum equals a from-scratch aggregation, never drifting with the
  update history): the members of the touched groups are read from the `members` state by a
  broadcast of those groups (only the touched groups' members are read, which for a huge group
  is its whole membership), with the batch's own memberships in place of their old rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from joins.changelog.keyed import keyed_state
from joins.operators.table_aggregate.spark_fold import ACC, KEY

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.table_aggregate.spec import TableAggregateSpec

GROUP = "group"
SUM_TYPE = "struct<is_float:boolean,i:bigint,d:double>"


def touched(folded: DataFrame) -> DataFrame:
    """(group, touch_ts, last): every group a touch of the batch named."""
    from pyspark.sql import functions as F

    t = folded.select(F.explode(F.col(ACC)["touches"]).alias("t"))
    return t.groupBy(F.col("t.group").alias(GROUP)).agg(
        F.max("t.ts").alias("touch_ts"), F.max(F.struct("t.seq", "t.role")).alias("last"))


def count_deltas(folded: DataFrame) -> DataFrame:
    """(group, delta): keys that came into a group (+1) or left it (-1) over the batch."""
    from pyspark.sql import functions as F

    acc = F.col(ACC)
    moved = folded.where((acc["applied"] > 0) & ~acc["ig"].eqNullSafe(acc["mg"]))
    pairs = F.array(F.struct(acc["ig"].alias(GROUP), F.lit(-1).alias("d")),
                    F.struct(acc["mg"].alias(GROUP), F.lit(1).alias("d")))
    return (moved.select(F.explode(pairs).alias("p")).where(F.col("p.group").isNotNull())
            .groupBy(F.col("p.group").alias(GROUP)).agg(F.sum("p.d").alias("delta")))


def _sum(members: Column) -> Column:
    """Python's sum() over the members in order: an int total until the first float."""
    from pyspark.sql import functions as F

    def add(acc: Column, m: Column) -> Column:
        part = m["part"]
        is_int = part["kind"] == F.lit("int")
        as_double = F.when(acc["is_float"], acc["d"]).otherwise(acc["i"].cast("double"))
        return F.struct(
            (acc["is_float"] | ~is_int).alias("is_float"),
            F.when(~acc["is_float"] & is_int, acc["i"] + part["int"]).otherwise(acc["i"]).alias("i"),
            F.when(acc["is_float"] | ~is_int,
                   as_double + F.when(is_int, part["int"].cast("double")).otherwise(part["num"]))
            .otherwise(acc["d"]).alias("d"))

    zero = F.struct(F.lit(False).alias("is_float"), F.lit(0).cast("bigint").alias("i"),
                    F.lit(0.0).alias("d"))
    return F.aggregate(members, zero.cast(SUM_TYPE), add)


def member_values(members_log: DataFrame | None, folded: DataFrame, groups: DataFrame,
                  spec: TableAggregateSpec, key: str, order: Any) -> DataFrame:
    """(group, n, sum: SUM_TYPE | concat: string) of the touched `groups` after the batch.
    `order(column)`: the members' order of their input keys."""
    from pyspark.sql import functions as F

    acc = F.col(ACC)
    applied = folded.where(acc["applied"] > 0)
    mine = applied.where(acc["mg"].isNotNull()).select(
        F.col(KEY).alias(key), acc["mg"].alias(GROUP), acc["mc"].alias("part"))
    members = mine
    if members_log is not None:
        wanted = F.broadcast(groups.select(F.col(GROUP).alias("_g")))
        candidates = members_log.join(wanted, members_log[GROUP] == wanted["_g"], "left_semi")
        current = keyed_state(members_log, candidates, key)
        assert current is not None
        still = (current.join(wanted, current[GROUP] == wanted["_g"], "left_semi")
                 .join(F.broadcast(applied.select(F.col(KEY).alias(key))), key, "left_anti"))
        members = still.select(key, GROUP, "part").unionByName(mine)
    listed = members.groupBy(GROUP).agg(F.array_sort(F.collect_list(F.struct(
        order(F.col(key)).alias("o"), F.col("part").alias("part")))).alias("ms"))
    if spec.aggregate.function == "sum":
        value = _sum(F.col("ms"))
    else:
        value = F.concat_ws(",", F.transform(F.col("ms"), lambda m: m["part"]["text"]))
    return listed.select(GROUP, F.size("ms").alias("n"), value.alias("value"))
