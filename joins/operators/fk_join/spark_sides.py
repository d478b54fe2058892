"""Both tables of the foreign-key join at batch scale: which updates a side's store takes, and
what each key held before and after each of them.

A side is a table keyed by its own key (the left by the primary key, the right by the foreign
key's value). Its store decides every update once (`joins.core.store`): expired (beyond
history retention, decided batch-wide by `joins.changelog.mark_expired`), out of order (a
versioned side: older than the key's latest stored ts, tombstones included; an equal ts
replaces) or applied. Within a batch that is a running max per key in arrival order, so one
window per key decides every update of the batch at once. The window holds the key's rows of
every kind, ordered by `_ord`:

- its state rows (the side's keyed log, `_st`: present, value, ts, latest[, fk, hash]; the
  largest batch id is the current one), before everything else;
- its updates, deciding `_applied`, `_old` / `_new` (the key's current value before / after
  the update, as a state struct) and `_next` (the `_ord` of the key's next applied update:
  the applied updates are the key's timeline, `_new` holding from `_ord` until `_next`);
- on the right, the subscription messages of the batch addressed to that key, each finding
  `_r`: the right row current at the message's `_ord` (what an answer carries).

`_ord` orders both inputs in one sequence: the arrival index times two plus the side (left
first on an equal index: two inputs numbered independently), the micro-batch rule's order;
state rows come before any update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.changelog import EXPIRED, STATE_BATCH
from joins.changelog.columns import checked_not_null
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

K, ORD, KIND, SEQ, UTS, TOMB, VAL, UFK = "_k", "_ord", "_kind", "_s", "_uts", "_tomb", "_v", "_ufk"
ST, APPLIED, OOO, OLD, NEW, NEXT, R_AT = "_st", "_applied", "_ooo", "_old", "_new", "_next", "_r"
# Row kinds of a side's window, in the order they sort at one `_ord`.
STATE, UPDATE, MESSAGE = 0, 1, 2
_STATE_ORD = -(1 << 62)  # + batch id: state rows first, the latest batch last


def order(seq: Column, side: Side) -> Column:
    """The batch-wide order of an update: both inputs' arrival indices interleaved."""
    from pyspark.sql import functions as F

    return seq.cast("long") * F.lit(2) + F.lit(0 if side == "left" else 1)


def value_hash(value: Column) -> Column:
    """The hash of a left value a subscription carries (KIP-213's "original value hash"): 128
    bits of its JSON spelling, as the reference engine's; null for no value."""
    from pyspark.sql import functions as F

    return F.unhex(F.md5(F.to_json(value)))


def not_null(column: Column, what: str, side: Side, key: Column, seq: Column) -> Column:
    return checked_not_null(column, what, operator=OPERATOR, side=side, key=key, seq=seq)


def value_type(schema: StructType, side: Side, cols: FkColumns) -> StructType:
    """The struct type of a side's value columns (as its changelog types them)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(v, schema[v].dataType, True) for v in cols.values(side)])


def state_struct(side: Side, vtype: DataType, fk_type: DataType | None, *,
                 present: bool = True) -> Column:
    """A side's state row (`lhs` / `rhs` columns) as (present, value, ts, latest[, fk, hash]);
    `present=False`: the struct of a key with no row (all null, not present)."""
    from pyspark.sql import functions as F

    def col(name: str, dtype: str | DataType) -> Column:
        return F.col(name).cast(dtype) if present else F.lit(None).cast(dtype)

    value = (F.struct(*(F.col(v) for v in vtype.fieldNames())).cast(vtype)  # type: ignore[attr-defined]
             if present else F.lit(None).cast(vtype))
    fields = [(F.coalesce(col(S_PRESENT, "boolean"), F.lit(False)) if present
               else F.lit(False)).alias("present"),
              value.alias("value"), col(S_TS, "long").alias("ts"), col(S_LATEST, "long").alias("latest")]
    if side == "left":
        assert fk_type is not None
        fields += [col(S_FK, fk_type).alias("fk"), col(S_HASH, "binary").alias("hash")]
    return F.struct(*fields)


def state_window_rows(log: DataFrame, key: str, struct: Column) -> DataFrame:
    """A side's keyed log rows as window rows: `_k`, `_ord` (before any update, by batch id),
    `_kind` STATE, `_st`."""
    from pyspark.sql import functions as F

    return log.select(F.col(key).alias(K),
                      (F.lit(_STATE_ORD) + F.col(STATE_BATCH)).cast("long").alias(ORD),
                      F.lit(STATE).alias(KIND), struct.alias(ST))


def update_rows(marked: DataFrame, side: Side, cols: FkColumns) -> DataFrame:
    """A side's new changelog rows (with EXPIRED) as window rows, checked: `_k`, `_ord`,
    `_kind` UPDATE, `_s`, `_uts`, `_tomb`, `_v`, `_expired` (and on the left `_ufk`)."""
    from pyspark.sql import functions as F

    c = cols.changelog(side)
    key, seq = F.col(c.key), F.col(c.seq)
    checked_seq = not_null(seq.cast("long"), "arrival index", side, key, seq)
    out = [not_null(key, "key", side, key, seq).alias(K), order(checked_seq, side).alias(ORD),
           F.lit(UPDATE).alias(KIND), checked_seq.alias(SEQ),
           not_null(F.col(c.ts).cast("long"), "ts", side, key, seq).alias(UTS),
           not_null(F.col(c.tombstone).cast("boolean"), "tombstone flag", side, key, seq).alias(TOMB),
           F.struct(*(F.col(v).alias(v) for v in cols.values(side))).alias(VAL), F.col(EXPIRED)]
    if side == "left":
        out.append(F.col(cols.foreign_key).alias(UFK))
    return marked.select(*out)


def decide(rows: DataFrame, side: Side, absent: Column, *, versioned: bool) -> DataFrame:
    """One window per key over `rows` (state, update and, on the right, message rows): every
    row with `_st` (the key's state), update rows with the columns of the module docstring,
    message rows with `_r` (the right row current at their `_ord`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_key = Window.partitionBy(K).orderBy(ORD, KIND)
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = by_key.rowsBetween(Window.unboundedPreceding, -1)
    after = by_key.rowsBetween(1, Window.unboundedFollowing)
    update = F.col(KIND) == F.lit(UPDATE)
    missing = {ST: F.when(F.lit(False), absent),  # no state yet
               # no update (only state and messages):
               UTS: F.lit(None).cast("long"), TOMB: F.lit(None).cast("boolean"),
               EXPIRED: F.lit(None).cast("boolean"), VAL: F.when(F.lit(False), absent["value"])}
    for name, null in missing.items():
        if name not in rows.columns:
            rows = rows.withColumn(name, null)
    state = rows.withColumn(ST, F.coalesce(F.last(ST, ignorenulls=True).over(upto), absent))
    stored = update & ~F.col(EXPIRED)
    latest = F.greatest(F.col(f"{ST}.latest"), F.max(F.when(stored, F.col(UTS))).over(before))
    in_order = F.lit(True) if not versioned else latest.isNull() | (F.col(UTS) >= latest)
    present = ~F.col(TOMB)
    new = [present.alias("present"), F.when(present, F.col(VAL)).alias("value"),
           F.col(UTS).alias("ts"), F.col(UTS).alias("latest")]
    if side == "left":
        new += [F.when(present, F.col(UFK)).alias("fk"),
                F.when(present, value_hash(F.col(VAL))).alias("hash")]
    decided = state.withColumn(APPLIED, stored & in_order).withColumn(
        NEW, F.when(F.col(APPLIED), F.struct(*new)))
    current = F.coalesce(F.last(F.col(NEW), ignorenulls=True).over(before), F.col(ST))
    return decided.select(
        "*", (stored & ~F.col(APPLIED)).alias(OOO),
        F.when(F.col(APPLIED), current).alias(OLD),
        F.when(F.col(KIND) == F.lit(MESSAGE), current).alias(R_AT),
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
