"""KIP-213's subscription/response protocol at batch scale (seed 004): the messages of a whole
micro-batch as DataFrames, decided set-wise, with no ordering assumption between partitions.

1. **Subscriptions** (`with_messages`, `message_rows`): every applied left update sends the
   messages of `lhs.plan_subscriptions` (the instruction table, as column expressions), each
   carrying the hash of the new left value and the update's place `_ord` in the batch.
2. **Answers** (`answers`): a subscription that asks for one is answered with the right row
   current at its `_ord` (found by the right side's window, `spark_sides.decide`), with
   Kafka's result timestamp.
3. **Fan-out** (`fan_out`): every applied right update answers the subscriptions of its key.
   The right side does not track which of them still hold: it answers every subscription of
   that key it saw made before the update (the store's, and the batch's own), each with the
   hash it was made with. A subscriber the batch did not move gets only its key's last update
   (the output is compacted per key); a moved one gets all of them.
4. **Guard** (`guarded`): one window per left key over its responses, its timeline in the
   batch and its state row: a response is kept only if its hash is the hash of the left value
   current at the response's `_ord` (the micro-batch rule decides which). A response computed
   for a value that has since changed, or for a subscription the key has left, is discarded
   as stale. Kept responses become results (a tombstone where the left row is gone, or, inner,
   the right), and the last result per key is the batch's output (`compacted`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.operators.fk_join.protocol import Instruction
from joins.operators.fk_join.spark_sides import (
    KIND,
    MESSAGE,
    NEW,
    NEXT,
    OLD,
    ORD,
    R_AT,
    ST,
    STATE,
    UPDATE,
    UTS,
    K,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.fk_join.spec import JoinType

DNP = Instruction.DELETE_KEY_NO_PROPAGATE.value
DAP = Instruction.DELETE_KEY_AND_PROPAGATE.value
PNULL = Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE.value
PONLY = Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE.value

MSGS, PK, FK, HASH, INSTR, IDX, MTS = "_msgs", "_pk", "_fk", "_hash", "_instr", "_idx", "_mts"
VORD, MOVED = "_vord", "_moved"
RP, RV, PROP, RTS, FANOUT = "_rp", "_rv", "_prop", "_rts", "_fanout"
CUR, VALID, EMIT, HIDDEN = "_cur", "_valid", "_emit", "_not_propagated"
RESPONSE = 3   # a response row of the guard's window (after state and timeline rows)


def _message(fk: Column, instruction: str, idx: int) -> Column:
    from pyspark.sql import functions as F

    return F.struct(fk.alias(FK), F.lit(instruction).alias(INSTR), F.lit(idx).alias(IDX))


def with_messages(left: DataFrame, join: JoinType) -> DataFrame:
    """`left` (decided left updates) plus `_msgs`: the subscription messages of each applied
    update, in the order `lhs.plan_subscriptions` sends them (none for the others: their
    `_old` and `_new` are null, so is every condition)."""
    from pyspark.sql import functions as F

    old_p, old_fk = F.col(OLD)["present"], F.col(OLD)["fk"]
    new_p, new_fk = F.col(NEW)["present"], F.col(NEW)["fk"]
    changed = ~old_fk.eqNullSafe(new_fk)
    if join == "left":
        first = F.when(old_p & old_fk.isNotNull() & changed, _message(old_fk, DNP, 0))
        # Every update is answered (a delete and a null FK through the null FK, never stored).
        second = F.when(old_p | new_p, _message(new_fk, PNULL, 1))
    else:
        subscribed = old_p & old_fk.isNotNull()
        joins = new_p & new_fk.isNotNull()
        first = (F.when(joins & subscribed & changed, _message(old_fk, DNP, 0))
                 .when(~joins & subscribed, _message(old_fk, DAP, 0)))
        second = (F.when(joins & ~subscribed, _message(new_fk, PONLY, 1))
                  .when(joins & changed, _message(new_fk, PNULL, 1))
                  .when(joins, _message(new_fk, PONLY, 1)))
    return left.withColumn(MSGS, F.filter(F.array(first, second), lambda m: m.isNotNull()))


def message_rows(left: DataFrame) -> DataFrame:
    """One row per message: `_pk`, `_fk` (null: a left join's null FK), `_instr`, `_idx`,
    `_hash` (of the new left value), `_mts` (the left update's ts), `_ord`."""
    from pyspark.sql import functions as F

    exploded = left.where(F.size(MSGS) > 0).select(
        F.col(K).alias(PK), F.col(NEW)["hash"].alias(HASH), F.col(UTS).alias(MTS), ORD,
        F.explode(MSGS).alias("_m"))
    return exploded.select(PK, "_m.*", HASH, MTS, ORD)


def as_window_rows(messages: DataFrame) -> DataFrame:
    """Messages as rows of the right side's window (keyed by their foreign key)."""
    from pyspark.sql import functions as F

    return messages.withColumn(K, F.col(FK)).withColumn(KIND, F.lit(MESSAGE))


def answers(decided_messages: DataFrame) -> DataFrame:
    """The responses to the subscriptions that ask for one (message rows of the right window,
    with `_r`): `_pk`, `_hash`, `_rp` (a right row answers), `_rv`, `_prop` (propagate a null
    answer), `_rts`, `_ord`, `_fanout` false."""
    from pyspark.sql import functions as F

    present = F.coalesce(F.col(R_AT)["present"], F.lit(False))
    # Kafka's SubscriptionJoinProcessorSupplier: max(left ts, ts of the current right value),
    # the left ts alone when there is none (absent, deleted, or a null foreign key).
    ts = F.when(present, F.greatest(F.col(MTS), F.col(R_AT)["ts"])).otherwise(F.col(MTS))
    instr = F.col(INSTR)
    rp = F.when(instr == F.lit(DAP), F.lit(False)).otherwise(present)
    prop = (F.when(instr == F.lit(DAP), F.lit(True)).when(instr == F.lit(PNULL), ~present)
            .otherwise(F.lit(False)))
    asked = (instr != F.lit(DNP)) & ((instr != F.lit(PONLY)) | present)
    return decided_messages.where(asked).select(
        PK, HASH, rp.alias(RP), F.when(rp, F.col(R_AT)["value"]).alias(RV), prop.alias(PROP),
        ts.alias(RTS), ORD, F.lit(False).alias(FANOUT))


def fan_out(right_timeline: DataFrame, versions: DataFrame) -> DataFrame:
    """The responses of the batch's applied right updates to `versions` (`_fk`, `_pk`,
    `_hash`, `_vord` where the subscription was made (-1: before the batch), `_moved`): each
    update answers the subscriptions made before it, whether or not they were replaced since
    (the guard decides); an unmoved subscriber only its key's last update. The right updates
    of a batch are few: they are broadcast, the subscriptions are not shuffled."""
    from pyspark.sql import functions as F

    made_before = ((F.col(FK) == F.col(K)) & (F.col(VORD) < F.col(ORD))
                   & (F.col(MOVED) | F.col(NEXT).isNull()))
    pairs = versions.join(F.broadcast(right_timeline), made_before)
    new = F.col(NEW)
    # Kafka's ForeignTableJoinProcessorSupplier: the right update's own ts, whatever the
    # subscriber's; a right tombstone asks for a null result to be propagated.
    return pairs.select(PK, HASH, new["present"].alias(RP),
                        F.when(new["present"], new["value"]).alias(RV),
                        (~new["present"]).alias(PROP), new["ts"].alias(RTS), ORD,
                        F.lit(True).alias(FANOUT))


def guarded(responses: DataFrame, left_timeline: DataFrame | None, left_state: DataFrame | None,
            absent: Column, *, verify_hash: bool = True) -> DataFrame:
    """Every response with `_cur` (the left row current at its `_ord`: the key's timeline in
    the batch, else its state row), `_valid` (its hash is that row's: not stale), `_emit` (it
    produces a result) and `_not_propagated`. `left_state`: window rows of the `lhs` log
    (`spark_sides.state_window_rows`). `verify_hash=False` (tests only) keeps every response:
    the stale-result bug of seed 004."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = responses.withColumn(K, F.col(PK)).withColumn(KIND, F.lit(RESPONSE))
    if left_timeline is not None:
        rows = rows.unionByName(left_timeline.select(K, ORD, F.lit(UPDATE).alias(KIND),
                                                     F.col(NEW).alias(ST)),
                                allowMissingColumns=True)
    if left_state is not None:
        rows = rows.unionByName(left_state.select(K, ORD, F.lit(STATE).alias(KIND), ST),
                                allowMissingColumns=True)
    if ST not in rows.columns:
        rows = rows.withColumn(ST, F.when(F.lit(False), absent))
    # A timeline row at a response's own `_ord` (the update it answers) sorts before it.
    upto = Window.partitionBy(K).orderBy(ORD, KIND).rowsBetween(Window.unboundedPreceding,
                                                               Window.currentRow)
    current = F.coalesce(F.last(ST, ignorenulls=True).over(upto), absent)
    at = rows.withColumn(CUR, current).where(F.col(KIND) == F.lit(RESPONSE))
    valid = F.col(HASH).eqNullSafe(F.col(CUR)["hash"]) if verify_hash else F.lit(True)
    return at.select("*", valid.alias(VALID), (valid & (F.col(RP) | F.col(PROP))).alias(EMIT),
                     (valid & ~F.col(RP) & ~F.col(PROP)).alias(HIDDEN))


def compacted(guarded_rows: DataFrame, join: JoinType) -> DataFrame:
    """The last result per left key of the batch (`_ord` order): `_pk`, `tomb`, `left`,
    `right` (null where the result holds no right row), `ts`, `ord`."""
    from pyspark.sql import functions as F

    tomb = ~F.col(CUR)["present"] | (~F.col(RP) & F.lit(join == "inner"))
    result = F.struct(tomb.alias("tomb"), F.when(~tomb, F.col(CUR)["value"]).alias("left"),
                      F.when(~tomb & F.col(RP), F.col(RV)).alias("right"),
                      F.col(RTS).alias("ts"), F.col(ORD).alias("ord"))
    # Grouped by the window's key: no second shuffle.
    last = (guarded_rows.where(F.col(EMIT)).groupBy(F.col(K).alias(PK))
            .agg(F.max_by(result, F.col(ORD)).alias("_res")))
    return last.select(PK, "_res.*")
