"""The table aggregate's per-key fold (the reference processor's membership bookkeeping).

Each input key's updates of a batch (arrival order) are folded over its membership as the
batch starts (`members` state: the group of its current value and what it contributes):

- an expired update (beyond a versioned input's retention) or an out-of-order one (older than
  the key's latest ts, versioned input) does nothing;
- otherwise the key leaves its old group (a touch of that group) and, unless the update is a
  tombstone or its group key is null or absent (skipped, counted), joins the new group (a
  touch of it; one touch when the group is the same);
- a value the aggregate cannot use (an array group key, a sum field that is no number, a
  missing sum/concat field) fails the batch naming the record, as the reference raises.

The fold yields per key: the final membership, the initial group (for counts), the touches
(group, arrival, old/new, ts) and the counters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from joins.changelog import EXPIRED, ChangelogColumns
from joins.changelog.forward import counted, out_of_order
from joins.operators.table_aggregate.spec import OPERATOR, TableAggregateSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.changelog.values import JsonValues, TypedValues

KEY, UPDATE, UPDATES, ACC = "_key", "_u", "_us", "_acc"
PART_TYPE = "struct<kind:string,num:double,int:bigint,text:string>"
TOUCH_TYPE = "array<struct<group:string,seq:bigint,role:int,ts:bigint>>"
COUNTS = ("expired", "out_of_order_ignored", "null_group_key_skipped")


def _bad(seq: Column, path: str | None, message: Column) -> Column:
    """The reference's InputRecordError text for a bad record, raised from inside Spark."""
    from pyspark.sql import functions as F

    where = "value" if path is None else f"value.{path}"
    return F.raise_error(F.concat(F.lit(f"{OPERATOR} input, record "), seq.cast("string"),
                                  F.lit(f", field '{where}': "), message))


def contribution(spec: TableAggregateSpec, values: JsonValues | TypedValues, seq: Column) -> Column:
    """(kind, num, int, text) a value contributes; a failure for a value that cannot."""
    from pyspark.sql import functions as F

    agg = spec.aggregate
    if agg.function == "count":
        return F.struct(F.lit("int").alias("kind"), F.lit(1.0).alias("num"),
                        F.lit(1).cast("bigint").alias("int"), F.lit(None).cast("string").alias("text"))
    part = values.field(agg.field)
    kind = part["kind"]
    missing = _bad(seq, agg.field, F.lit(f"has no field {agg.field!r} to {agg.function}"))
    if agg.function == "sum":
        check = F.when(kind == F.lit("missing"), missing).when(
            ~kind.isin("int", "float"), _bad(seq, agg.field, F.concat(
                F.lit("sum needs a number, got "), part["key"])))
    else:
        check = F.when(kind == F.lit("missing"), missing)
    text = F.when(kind == F.lit("string"), part["text"]).otherwise(part["key"])
    return F.struct(F.coalesce(check.cast("string"), kind).alias("kind"), part["num"].alias("num"),
                    part["int"].alias("int"), text.alias("text"))


def updates_of(marked: DataFrame, spec: TableAggregateSpec, values: JsonValues | TypedValues,
               cols: ChangelogColumns) -> DataFrame:
    """(KEY, UPDATE) of the batch's rows (with EXPIRED)."""
    from pyspark.sql import functions as F

    seq, tomb = F.col(cols.seq).cast("long"), F.col(cols.tombstone)
    group = values.field(spec.group_path)
    gkind = group["kind"]
    skipped = gkind.isin("missing", "null")
    array = _bad(seq, spec.group_path, F.concat(
        F.lit("a group key must be a JSON scalar or object, got "), group["key"]))
    gkey = F.when(gkind == F.lit("array"), array.cast("string")).otherwise(group["key"])
    # A tombstone has no group; a skipped value contributes nothing (and is not checked).
    usable = ~tomb & ~skipped
    update = F.struct(
        seq.alias("seq"), F.col(EXPIRED).alias("expired"), F.col(cols.ts).cast("long").alias("ts"),
        tomb.alias("tomb"), (~tomb & skipped).alias("skip"),
        F.when(usable, gkey).alias("group"),
        F.when(usable, contribution(spec, values, seq)).otherwise(F.lit(None).cast(PART_TYPE)).alias("part"))
    return marked.select(F.col(cols.key).alias(KEY), update.alias(UPDATE))


def initial(has_state: bool) -> Column:
    from pyspark.sql import functions as F

    zero = F.lit(0)
    group = F.col("group") if has_state else F.lit(None).cast("string")
    part = F.col("part") if has_state else F.lit(None).cast(PART_TYPE)
    latest = F.col("latest_ts").cast("long") if has_state else F.lit(None).cast("long")
    return F.struct(group.alias("ig"), group.alias("mg"), part.alias("mc"), latest.alias("clatest"),
                    zero.alias("applied"), *(zero.alias(c) for c in COUNTS),
                    F.array().cast(TOUCH_TYPE).alias("touches"))


def merge(spec: TableAggregateSpec) -> Any:
    from pyspark.sql import functions as F

    versioned = F.lit(spec.versioned)

    def step(acc: Column, x: Column) -> Column:
        def count(name: str, cond: Column) -> Column:
            return counted(acc, name, cond)

        expired, ts, seq = x["expired"], x["ts"], x["seq"]
        ooo = out_of_order(acc, x, versioned)
        applied = ~expired & ~ooo
        old, new = acc["mg"], x["group"]
        leave = F.when(applied & old.isNotNull(), F.array(F.struct(
            old.alias("group"), seq.alias("seq"), F.lit(0).alias("role"), ts.alias("ts"))))
        join = F.when(applied & new.isNotNull() & (old.isNull() | (old != new)), F.array(F.struct(
            new.alias("group"), seq.alias("seq"), F.lit(1).alias("role"), ts.alias("ts"))))
        empty = F.array().cast(TOUCH_TYPE)
        touches = F.concat(acc["touches"], F.coalesce(leave, empty), F.coalesce(join, empty))
        return F.struct(
            acc["ig"].alias("ig"), F.when(applied, new).otherwise(old).alias("mg"),
            F.when(applied, x["part"]).otherwise(acc["mc"]).alias("mc"),
            F.when(applied, F.greatest(acc["clatest"], ts)).otherwise(acc["clatest"]).alias("clatest"),
            count("applied", applied), count("expired", expired), count("out_of_order_ignored", ooo),
            count("null_group_key_skipped", applied & x["skip"]), touches.alias("touches"))

    return step


def fold(updates: DataFrame, state: DataFrame | None, spec: TableAggregateSpec, key: str) -> DataFrame:
    """(KEY, ACC) per input key of `updates`; `state`: the keys' `members` rows."""
    from pyspark.sql import functions as F

    grouped = updates.groupBy(KEY).agg(F.array_sort(F.collect_list(UPDATE)).alias(UPDATES))
    if state is not None:
        grouped = grouped.join(state.withColumnRenamed(key, KEY), KEY, "left")
    return grouped.select(KEY, F.aggregate(UPDATES, initial(state is not None), merge(spec)).alias(ACC))
