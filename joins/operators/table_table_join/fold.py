"""One micro-batch of the primary-key join, per key, exactly as the reference processor.

The micro-batch rule (`joins.microbatch`, `DEFINITION.batch_phase`): both sides' updates of a
batch are applied in arrival order, interleaved, and the output is compacted to the last
result per key. Keys never interact, so a batch is a fold per key: the key's updates (both
sides, sorted by arrival) are folded, with Spark's `aggregate` higher-order function, over the
key's state as the batch starts (`current`). The fold is `TableTableJoinProcessor.process`
written as column expressions:

- an update the side's store refuses is expired (decided before, batch-wide, by
  `joins.changelog.mark_expired`) and does nothing; on a versioned side an update older than
  the key's latest stored ts (tombstones included) is out of order and does nothing either;
  an equal ts replaces and counts as in order;
- otherwise the side's current value becomes the update's (a tombstone: no current value), and
  the update emits when the result before or after it exists: `[left, right]`, or a tombstone;
  its ts is max(update ts, the other side's current value's ts), the update's own ts when the
  other side has no current value (Kafka Streams);
- the accumulator keeps the last emission only: that is the batch's compacted output.

A key's updates are one array: a key with millions of updates in one batch would be one task's
work (a primary-key changelog rarely has that; the batch form, `history.py`, has no such limit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from joins.changelog import EXPIRED
from joins.changelog.columns import checked_not_null
from joins.operators.table_table_join.columns import (
    OPERATOR,
    SIDES,
    Side,
    TableTableColumns,
    latest_ts,
    present,
    side_ts,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from joins.operators.table_table_join.spec import JoinType, TableTableJoinSpec

KEY = "_key"          # the join key inside the fold (each input names its own)
UPDATE = "_u"         # one update: struct(seq, right, expired, ts, tomb, lv, rv)
UPDATES = "_us"       # a key's updates of the batch, in arrival order
ACC = "_acc"          # the fold's result per key
_SHORT: dict[Side, str] = {"left": "l", "right": "r"}


def _checked(column: Column, what: str, side: Side, key: Column, seq: Column) -> Column:
    return checked_not_null(column, what, operator=OPERATOR, side=side, key=key, seq=seq)


def side_updates(marked: DataFrame, side: Side, cols: TableTableColumns,
                 types: dict[Side, StructType]) -> DataFrame:
    """A side's new rows (with EXPIRED) as (KEY, UPDATE). On equal arrival indices (two inputs
    numbered independently) the left update comes first."""
    from pyspark.sql import functions as F

    c = cols.changelog(side)
    key, seq = F.col(c.key), F.col(c.seq)
    values = {s: (F.struct(*(F.col(v).alias(v) for v in cols.values(s))) if s == side
                  else F.lit(None).cast(types[s])) for s in SIDES}
    update = F.struct(
        _checked(seq.cast("long"), "arrival index", side, key, seq).alias("seq"),
        F.lit(side == "right").alias("right"),
        F.col(EXPIRED).alias("expired"),
        _checked(F.col(c.ts).cast("long"), "ts", side, key, seq).alias("ts"),
        _checked(F.col(c.tombstone).cast("boolean"), "tombstone flag", side, key, seq).alias("tomb"),
        values["left"].alias("lv"), values["right"].alias("rv"))
    return marked.select(_checked(key, "key", side, key, seq).alias(KEY), update.alias(UPDATE))


def _result(join: JoinType, left: Column, right: Column) -> Column:
    """Does a result exist, given which sides hold a value (the reference's join_value)."""
    if join == "inner":
        return left & right
    if join == "left":
        return left
    return left | right


def _initial(state: DataFrame | None, cols: TableTableColumns,
             types: dict[Side, StructType]) -> Column:
    """The accumulator a key starts from: its state row (a left-joined state: nulls = none)."""
    from pyspark.sql import functions as F

    fields: list[Column] = []
    for side in SIDES:
        s = _SHORT[side]
        if state is None:
            fields += [F.lit(False).alias(f"{s}p"), F.lit(None).cast(types[side]).alias(f"{s}v"),
                       F.lit(None).cast("long").alias(f"{s}ts"),
                       F.lit(None).cast("long").alias(f"{s}latest")]
            continue
        value = F.struct(*(F.col(cols.out(side, v)).alias(v) for v in cols.values(side)))
        held = F.coalesce(F.col(present(side)), F.lit(False))
        # Null where the side holds no value, as the fold's own updates make it: a value that is
        # never null here typed the accumulator non-nullable, and Spark 4.2's generated code
        # then read a null the merge put there (a NullPointerException in the demo's second
        # batch; the tests' interpreted plans do not show it).
        fields += [held.alias(f"{s}p"),
                   F.when(held, value.cast(types[side])).alias(f"{s}v"),
                   F.col(side_ts(side)).cast("long").alias(f"{s}ts"),
                   F.col(latest_ts(side)).cast("long").alias(f"{s}latest")]
    zero = F.lit(0)
    fields += [zero.alias("applied"), zero.alias("ooo_l"), zero.alias("ooo_r"),
               zero.alias("exp_l"), zero.alias("exp_r"), F.lit(False).alias("emitted"),
               F.lit(False).alias("o_exists"), F.lit(False).alias("o_lp"),
               F.lit(None).cast(types["left"]).alias("o_lv"), F.lit(False).alias("o_rp"),
               F.lit(None).cast(types["right"]).alias("o_rv"),
               F.lit(None).cast("long").alias("o_ts"), F.lit(None).cast("long").alias("o_seq")]
    return F.struct(*fields)


def _merge(spec: TableTableJoinSpec, types: dict[Side, StructType]) -> Any:
    from pyspark.sql import functions as F

    def count(acc: Column, name: str, cond: Column) -> Column:
        return (acc[name] + F.when(cond, F.lit(1)).otherwise(F.lit(0))).alias(name)

    def merge(acc: Column, x: Column) -> Column:
        right = x["right"]
        left = ~right
        versioned = F.when(right, F.lit(spec.right.versioned)).otherwise(F.lit(spec.left.versioned))
        latest = F.when(right, acc["rlatest"]).otherwise(acc["llatest"])
        expired = x["expired"]
        out_of_order = ~expired & versioned & latest.isNotNull() & (x["ts"] < latest)
        applied = ~expired & ~out_of_order
        new: dict[str, Column] = {}
        for side, on in (("left", applied & left), ("right", applied & right)):
            s = _SHORT[side]
            new[f"{s}p"] = F.when(on, ~x["tomb"]).otherwise(acc[f"{s}p"])
            new[f"{s}v"] = F.when(on & ~x["tomb"], x[f"{s}v"]).when(
                on, F.lit(None).cast(types[side])).otherwise(acc[f"{s}v"])
            new[f"{s}ts"] = F.when(on, x["ts"]).otherwise(acc[f"{s}ts"])
            new[f"{s}latest"] = F.when(on, F.greatest(acc[f"{s}latest"], x["ts"])).otherwise(
                acc[f"{s}latest"])
        before = _result(spec.join, acc["lp"], acc["rp"])
        after = _result(spec.join, new["lp"], new["rp"])
        emit = applied & (before | after)
        other_present = F.when(right, acc["lp"]).otherwise(acc["rp"])
        other_ts = F.when(right, acc["lts"]).otherwise(acc["rts"])
        ts = F.when(other_present, F.greatest(x["ts"], other_ts)).otherwise(x["ts"])

        def last(name: str, value: Column) -> Column:
            return F.when(emit, value).otherwise(acc[name]).alias(name)

        return F.struct(
            *(value.alias(name) for name, value in new.items()),
            count(acc, "applied", applied),
            count(acc, "ooo_l", out_of_order & left), count(acc, "ooo_r", out_of_order & right),
            count(acc, "exp_l", expired & left), count(acc, "exp_r", expired & right),
            (acc["emitted"] | emit).alias("emitted"),
            last("o_exists", after), last("o_lp", new["lp"]), last("o_lv", new["lv"]),
            last("o_rp", new["rp"]), last("o_rv", new["rv"]), last("o_ts", ts),
            last("o_seq", x["seq"]))

    return merge


def fold(updates: DataFrame, state: DataFrame | None, spec: TableTableJoinSpec,
         cols: TableTableColumns, types: dict[Side, StructType]) -> DataFrame:
    """(KEY, ACC) per key of `updates`: the key's state after the batch, what it emitted last
    and what it ignored. `state`: the keys' current rows (`joins.changelog.keyed_state`)."""
    from pyspark.sql import functions as F

    grouped = updates.groupBy(KEY).agg(F.array_sort(F.collect_list(UPDATE)).alias(UPDATES))
    if state is not None:
        grouped = grouped.join(state.withColumnRenamed(cols.key, KEY), KEY, "left")
    return grouped.select(KEY, F.aggregate(UPDATES, _initial(state, cols, types),
                                           _merge(spec, types)).alias(ACC))
