"""KIP-213's subscription/response protocol at batch scale (seed 004): the messages of a whole
micro-batch as DataFrames, decided set-wise, with no ordering assumption between partitions.

1. **Subscriptions** (`subscription_messages`): every applied left update sends the messages of
   `lhs.plan_subscriptions` (the instruction table, as column expressions), each carrying the
   hash of the new left value and the update's place `_ord` in the batch.
2. **Answers** (`answers`): a subscription that asks for one is answered with the right row
   current at its `_ord` (the right side's timeline of the batch, else its state), with Kafka's
   result timestamp.
3. **Fan-out** (`fan_out`): every applied right update answers the subscriptions of its key.
   The right side does not order them: it answers every subscription of that key the batch
   saw (its state's and the batch's own), each with the hash it was made with. A subscriber
   the batch did not move gets only the key's last update (the output is compacted per key);
   a moved subscriber gets all of them, because which one it still held is decided next.
4. **Guard** (`guard`): the left side keeps a response only if its hash is the hash of the
   left value that was current at the response's `_ord` (the micro-batch rule decides which:
   the left timeline of the batch, else the state). A response computed for a value that
   had since changed, or for a subscription that had moved, is discarded as stale. Kept
   responses become results (a tombstone where the left row is gone, or, inner, the right).
5. **Compaction** (`compacted`): the last result per left key, by `_ord`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.operators.fk_join.protocol import Instruction
from joins.operators.fk_join.spark_sides import NEW, NEXT, OLD, ORD, UTS, K

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.fk_join.spec import JoinType

DNP = Instruction.DELETE_KEY_NO_PROPAGATE.value
DAP = Instruction.DELETE_KEY_AND_PROPAGATE.value
PNULL = Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE.value
PONLY = Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE.value

MSGS, PK, FK, HASH, INSTR, IDX, MTS = "_msgs", "_pk", "_fk", "_hash", "_instr", "_idx", "_mts"
VORD = "_vord"
RP, RV, PROP, RTS, FANOUT = "_rp", "_rv", "_prop", "_rts", "_fanout"
CUR, VALID, EMIT, HIDDEN = "_cur", "_valid", "_emit", "_not_propagated"


def _message(fk: Column, instruction: str, idx: int) -> Column:
    from pyspark.sql import functions as F

    return F.struct(fk.alias(FK), F.lit(instruction).alias(INSTR), F.lit(idx).alias(IDX))


def with_messages(left: DataFrame, join: JoinType) -> DataFrame:
    """`left` (decided left updates) plus `_msgs`: the subscription messages of each applied
    update, in the order `lhs.plan_subscriptions` sends them (empty for the others)."""
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
    # Not applied: OLD and NEW are null, every condition is null, no message.
    return left.withColumn(MSGS, F.filter(F.array(first, second), lambda m: m.isNotNull()))


def subscription_messages(left: DataFrame) -> DataFrame:
    """One row per message: `_pk`, `_fk` (null: a left join's null FK), `_instr`, `_idx`,
    `_hash` (of the new left value), `_mts` (the left update's ts), `_ord`."""
    from pyspark.sql import functions as F

    exploded = left.where(F.size(MSGS) > 0).select(
        F.col(K).alias(PK), F.col(NEW)["hash"].alias(HASH), F.col(UTS).alias(MTS), ORD,
        F.explode(MSGS).alias("_m"))
    return exploded.select(PK, "_m.*", HASH, MTS, ORD)


def _at(frame: DataFrame, key: str, timeline: DataFrame | None, rows: DataFrame | None,
        name: str, absent: Column, *, inclusive: bool) -> DataFrame:
    """`frame` plus `name`: the row of key `key` current at each row's `_ord` (the struct
    of `spark_sides`: present, value, ts, ...), from the batch's `timeline` (the interval
    holding `_ord`; `inclusive`: an update at that very `_ord` counts) else the state `rows`
    (`_sk`, `_st`), else `absent` (the same struct, not present)."""
    from pyspark.sql import functions as F

    found: list[Column] = []
    out = frame
    if timeline is not None:
        tl = timeline.select(F.col(K).alias("_tk"), F.col(ORD).alias("_tord"),
                             F.col(NEXT).alias("_tnext"), F.col(NEW).alias("_tnew"))
        starts = F.col("_tord") <= F.col(ORD) if inclusive else F.col("_tord") < F.col(ORD)
        # Intervals of a key are disjoint: at most one holds `_ord`.
        cond = ((F.col(key) == F.col("_tk")) & starts
                & (F.col("_tnext").isNull() | (F.col(ORD) < F.col("_tnext"))))
        out = out.join(tl, cond, "left").drop("_tk", "_tord", "_tnext")
        found.append(F.col("_tnew"))
    if rows is not None:
        out = out.join(rows, F.col(key) == F.col("_sk"), "left").drop("_sk")
        found.append(F.col("_st"))
    return out.withColumn(name, F.coalesce(*found, absent)).drop("_tnew", "_st")


def state_rows_of(current: DataFrame | None, key: str, struct: Column) -> DataFrame | None:
    """A side's state (one row per key) as (`_sk`, `_st`) for `_at`."""
    from pyspark.sql import functions as F

    return None if current is None else current.select(F.col(key).alias("_sk"), struct.alias("_st"))


def answers(messages: DataFrame, right_timeline: DataFrame | None, right_rows: DataFrame | None,
            absent: Column) -> DataFrame:
    """The responses to the subscriptions that ask for one: `_pk`, `_hash`, `_rp` (a right
    row answers), `_rv`, `_prop` (propagate a null answer), `_rts`, `_ord`, `_fanout`."""
    from pyspark.sql import functions as F

    asked = messages.where(F.col(INSTR) != F.lit(DNP))
    at = _at(asked, FK, right_timeline, right_rows, "_r", absent, inclusive=False)
    present = F.col("_r.present")
    # Kafka's SubscriptionJoinProcessorSupplier: max(left ts, ts of the current right value),
    # the left ts alone when there is none (absent, deleted, or a null foreign key).
    ts = F.when(present, F.greatest(F.col(MTS), F.col("_r.ts"))).otherwise(F.col(MTS))
    instr = F.col(INSTR)
    rp = F.when(instr == F.lit(DAP), F.lit(False)).otherwise(present)
    prop = (F.when(instr == F.lit(DAP), F.lit(True)).when(instr == F.lit(PNULL), ~present)
            .otherwise(F.lit(False)))
    return at.where((instr != F.lit(PONLY)) | present).select(
        PK, HASH, rp.alias(RP), F.when(rp, F.col("_r.value")).alias(RV), prop.alias(PROP),
        ts.alias(RTS), ORD, F.lit(False).alias(FANOUT))


def fan_out(right_timeline: DataFrame, versions: DataFrame, moved: DataFrame | None) -> DataFrame:
    """The responses of the batch's applied right updates to `versions` (`_fk`, `_pk`,
    `_hash`, `_vord`: every subscription of those keys the batch saw, and where it was made):
    each update answers the subscriptions made before it, whether or not they were replaced
    since (the guard decides). A subscriber the batch did not move (`moved`: the left keys it
    updated) gets only its key's last update."""
    from pyspark.sql import functions as F

    last = right_timeline.where(F.col(NEXT).isNull())
    made_before = (F.col(FK) == F.col(K)) & (F.col(VORD) < F.col(ORD))
    if moved is None:
        pairs = versions.join(last, made_before)
    else:
        probe = F.broadcast(moved.select(F.col(K).alias("_mk")))
        still = versions.join(probe, F.col(PK) == F.col("_mk"), "left_anti")
        moving = versions.join(probe, F.col(PK) == F.col("_mk"), "left_semi")
        pairs = still.join(last, made_before).unionByName(moving.join(right_timeline, made_before))
    new = F.col(NEW)
    # Kafka's ForeignTableJoinProcessorSupplier: the right update's own ts, whatever the
    # subscriber's; a right tombstone asks for a null result to be propagated.
    return pairs.select(PK, HASH, new["present"].alias(RP),
                        F.when(new["present"], new["value"]).alias(RV),
                        (~new["present"]).alias(PROP), new["ts"].alias(RTS), ORD,
                        F.lit(True).alias(FANOUT))


def guard(responses: DataFrame, left_timeline: DataFrame | None, left_rows: DataFrame | None,
          absent: Column, *, verify_hash: bool = True) -> DataFrame:
    """Every response with `_cur` (the left row current at its `_ord`), `_valid` (its hash is
    that row's: not stale), `_emit` (it produces a result) and `_not_propagated`.
    `verify_hash=False` (tests only) keeps every response: the stale-result bug of seed 004."""
    from pyspark.sql import functions as F

    at = _at(responses, PK, left_timeline, left_rows, CUR, absent, inclusive=True)
    valid = F.col(HASH).eqNullSafe(F.col(f"{CUR}.hash")) if verify_hash else F.lit(True)
    return at.select("*", valid.alias(VALID),
                     (valid & (F.col(RP) | F.col(PROP))).alias(EMIT),
                     (valid & ~F.col(RP) & ~F.col(PROP)).alias(HIDDEN))


def compacted(guarded: DataFrame, join: JoinType) -> DataFrame:
    """The last result per left key of the batch (`_ord` order): `_pk`, `_tomb`, `_left`,
    `_right` (null where the result holds no right row), `_ts`, `_ord`."""
    from pyspark.sql import functions as F

    tomb = ~F.col(f"{CUR}.present") | (~F.col(RP) & F.lit(join == "inner"))
    result = F.struct(tomb.alias("tomb"), F.when(~tomb, F.col(f"{CUR}.value")).alias("left"),
                      F.when(~tomb & F.col(RP), F.col(RV)).alias("right"),
                      F.col(RTS).alias("ts"), F.col(ORD).alias("ord"))
    last = (guarded.where(F.col(EMIT)).groupBy(PK)
            .agg(F.max_by(result, F.col(ORD)).alias("_res")))
    return last.select(PK, "_res.*")
