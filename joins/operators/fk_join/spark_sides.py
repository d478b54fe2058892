"""Both tables of the foreign-key join at batch scale: which updates a side's store takes, and
what each key held before and after each of them.

A side is a table keyed by its own key (the left by the primary key, the right by the foreign
key's value). Its store decides every update once (`joins.core.store`): expired (beyond
history retention, decided batch-wide by `joins.changelog.mark_expired`), out of order (a
versioned side: older than the key's latest stored ts, tombstones included; an equal ts
replaces) or applied. Within a batch that is a running max per key in arrival order, so one
window per key decides it for every update of the batch at once:

- `_applied`: the update becomes the key's current value (a tombstone: no current value);
- `_old` / `_new`: the key's current value before / after it (`present`, `value`, `ts`, and on
  the left `fk` and `hash`), `_old` coming from the previous applied update of the batch or
  the key's state row;
- `_next`: the arrival (`_ord`) of the key's next applied update of the batch (null: the last),
  so the applied updates are the key's timeline: `_new` holds from `_ord` until `_next`.

`_ord` orders both inputs in one sequence: the arrival index times two plus the side (left
first on an equal index: two inputs numbered independently), the micro-batch rule's order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.changelog import EXPIRED
from joins.operators.fk_join.columns import (
    OPERATOR,
    S_FK,
    S_HASH,
    S_LATEST,
    S_PRESENT,
    S_TS,
    FkColumns,
    Side,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

K, ORD, SEQ, UTS, TOMB, VAL, UFK = "_k", "_ord", "_s", "_uts", "_tomb", "_v", "_ufk"
ST, APPLIED, OOO, OLD, NEW, NEXT = "_st", "_applied", "_ooo", "_old", "_new", "_next"


def order(seq: Column, side: Side) -> Column:
    """The batch-wide order of an update: both inputs' arrival indices interleaved."""
    from pyspark.sql import functions as F

    return seq.cast("long") * F.lit(2) + F.lit(0 if side == "left" else 1)


def value_hash(value: Column) -> Column:
    """The hash of a left value a subscription carries (KIP-213's "original value hash"): of
    its JSON spelling, 128 bits as the reference engine's; null for no value."""
    from pyspark.sql import functions as F

    return F.md5(F.to_json(value))


def not_null(column: Column, what: str, side: Side, key: Column, seq: Column) -> Column:
    """`column`, or a failure naming the update when it is null (never dropped silently)."""
    from pyspark.sql import functions as F

    message = F.concat(F.lit(f"{OPERATOR}: the {side} input has an update with a null {what} "
                             f"(key "), F.coalesce(key.cast("string"), F.lit("null")),
                       F.lit(", arrival "), F.coalesce(seq.cast("string"), F.lit("null")),
                       F.lit("): a changelog update needs its key, ts, tombstone flag and "
                             "arrival index"))
    return F.when(column.isNull(), F.raise_error(message)).otherwise(column)


def value_type(schema: StructType, side: Side, cols: FkColumns) -> StructType:
    """The struct type of a side's value columns (as its changelog types them)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(v, schema[v].dataType, True) for v in cols.values(side)])


def state_struct(side: Side, vtype: DataType, fk_type: DataType | None,
                 state: DataFrame | None, cols: FkColumns) -> Column:
    """A key's row in the side's state as (present, value, ts, latest[, fk, hash]); present is
    false when the key has no row."""
    from pyspark.sql import functions as F

    def col(name: str, dtype: str | DataType) -> Column:
        return F.lit(None).cast(dtype) if state is None else F.col(name).cast(dtype)

    value = (F.lit(None).cast(vtype) if state is None else
             F.struct(*(F.col(v).alias(v) for v in cols.values(side))).cast(vtype))
    fields = [F.coalesce(col(S_PRESENT, "boolean"), F.lit(False)).alias("present"),
              value.alias("value"), col(S_TS, "long").alias("ts"),
              col(S_LATEST, "long").alias("latest")]
    if side == "left":
        assert fk_type is not None
        fields += [col(S_FK, fk_type).alias("fk"), col(S_HASH, "string").alias("hash")]
    return F.struct(*fields)


def side_updates(marked: DataFrame, current: DataFrame | None, side: Side, cols: FkColumns, *,
                 versioned: bool) -> DataFrame:
    """Every update of `marked` (a side's new changelog rows with EXPIRED) decided against the
    side's state (`current`: one row per key, at least the batch's keys; None: no state yet):
    the columns of the module docstring, plus `_k`, `_s` (arrival), `_uts`, `_tomb`, `_v`."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    c = cols.changelog(side)
    key, seq = F.col(c.key), F.col(c.seq)
    value = F.struct(*(F.col(v).alias(v) for v in cols.values(side)))
    checked = [not_null(key, "key", side, key, seq).alias(K),
               not_null(seq.cast("long"), "arrival index", side, key, seq).alias(SEQ),
               not_null(F.col(c.ts).cast("long"), "ts", side, key, seq).alias(UTS),
               not_null(F.col(c.tombstone).cast("boolean"), "tombstone flag", side, key,
                        seq).alias(TOMB),
               value.alias(VAL), F.col(EXPIRED)]
    if side == "left":
        checked.append(F.col(cols.foreign_key).alias(UFK))
    updates = marked.select(*checked).withColumn(ORD, order(F.col(SEQ), side))
    vtype = updates.schema[VAL].dataType
    fk_type = updates.schema[UFK].dataType if side == "left" else None
    if current is not None:
        updates = updates.join(current.withColumnRenamed(c.key, K), K, "left")
    updates = updates.withColumn(ST, state_struct(side, vtype, fk_type, current, cols))

    by_key = Window.partitionBy(K).orderBy(ORD)
    before = by_key.rowsBetween(Window.unboundedPreceding, -1)
    after = by_key.rowsBetween(1, Window.unboundedFollowing)
    stored = ~F.col(EXPIRED)
    latest = F.greatest(F.col(f"{ST}.latest"), F.max(F.when(stored, F.col(UTS))).over(before))
    in_order = F.lit(True) if not versioned else latest.isNull() | (F.col(UTS) >= latest)
    applied = stored & in_order
    present = ~F.col(TOMB)
    new_fields = [present.alias("present"), F.when(present, F.col(VAL)).alias("value"),
                  F.col(UTS).alias("ts"), F.col(UTS).alias("latest")]
    if side == "left":
        new_fields += [F.when(present, F.col(UFK)).alias("fk"),
                       F.when(present, value_hash(F.col(VAL))).alias("hash")]
    new = F.struct(*new_fields)
    decided = updates.withColumn(APPLIED, applied).withColumn(NEW, F.when(F.col(APPLIED), new))
    previous = F.last(F.col(NEW), ignorenulls=True).over(before)
    return decided.select(
        "*", (stored & ~F.col(APPLIED)).alias(OOO),
        F.when(F.col(APPLIED), F.coalesce(previous, F.col(ST))).alias(OLD),
        F.when(F.col(APPLIED), F.first(F.when(F.col(APPLIED), F.col(ORD)),
                                       ignorenulls=True).over(after)).alias(NEXT))


def timeline(decided: DataFrame) -> DataFrame:
    """The applied updates only: (`_k`, `_ord`, `_next`, `_new`)."""
    from pyspark.sql import functions as F

    return decided.where(F.col(APPLIED)).select(K, ORD, NEXT, NEW)


def state_rows(decided: DataFrame, side: Side, cols: FkColumns, batch_id: int) -> DataFrame:
    """The side's state rows this batch appends: each changed key's value after its last
    applied update (`joins.changelog.keyed`: the largest batch id per key wins)."""
    from pyspark.sql import functions as F

    from joins.changelog import STATE_BATCH

    new = F.col(NEW)
    out = [F.col(K).alias(cols.changelog(side).key),
           *(new["value"][v].alias(v) for v in cols.values(side)),
           new["ts"].alias(S_TS), new["present"].alias(S_PRESENT), new["latest"].alias(S_LATEST)]
    if side == "left":
        out += [new["fk"].alias(S_FK), new["hash"].alias(S_HASH)]
    last = F.col(APPLIED) & F.col(NEXT).isNull()
    return decided.where(last).select(*out, F.lit(batch_id).cast("long").alias(STATE_BATCH))


def live(versioned: bool) -> Column:
    """A state row worth keeping at compaction: the key has a value, or, on a versioned side,
    a deleted key's latest ts that an out-of-order update must still be compared with."""
    from pyspark.sql import functions as F

    return F.col(S_PRESENT) | F.lit(versioned)
