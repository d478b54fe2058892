"""The frames of one foreign-key micro-batch, wired (docs/fk_join.md, "One micro-batch").

    lhs log (the batch's left keys and the fan-out's subscribers) ─┐
    left changes ─▶ left window (per primary key) ─▶ left decided ─▶ messages
    rhs log (the batch's right keys and the messages' FKs) ─┐      │
    right changes + messages ─▶ right window (per right key) ─▶ right decided, answers
    subscriptions log (the right changes' keys) + the batch's subscriptions ─▶ fan-out
    answers + fan-out + left timeline + lhs rows ─▶ guard window (per primary key) ─▶ results

Each window is one shuffle of the rows it needs. State is read only for the keys the batch
needs, each log once: the keys are broadcast into the scan (`keyed_state`'s left-semi join).
What is read twice is persisted: the lhs rows read, and both sides' decided rows (the output,
the state writes and the subscription write all read them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.changelog import keyed_state
from joins.operators.fk_join.columns import (
    LHS,
    RHS,
    S_FK,
    S_HASH,
    S_LIVE,
    S_PK,
    SUBSCRIPTIONS,
    FkColumns,
)
from joins.operators.fk_join.spark_protocol import (
    FK,
    HASH,
    INSTR,
    MOVED,
    PK,
    PNULL,
    PONLY,
    VORD,
    answers,
    as_window_rows,
    fan_out,
    guarded,
    message_rows,
    with_messages,
)
from joins.operators.fk_join.spark_sides import (
    APPLIED,
    KIND,
    MESSAGE,
    ORD,
    UPDATE,
    K,
    decide,
    state_struct,
    state_window_rows,
    timeline,
    update_rows,
)
from joins.spark.frames import SharedFrames, worth_checkpointing

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

    from joins.incremental import StepContext
    from joins.operators.fk_join.spec import FkJoinSpec


@dataclass
class BatchFrames:
    """What a batch computed; `left` / `right`: decided update rows (None: no changes).
    `shared`: the frames several later ones read (the subscriptions read, the lhs rows, both
    sides' decided rows), each computed once."""

    shared: SharedFrames
    left: DataFrame | None = None
    right: DataFrame | None = None
    messages: DataFrame | None = None
    guarded: DataFrame | None = None

    def cache(self, df: DataFrame) -> DataFrame:
        return self.shared.keep(df)

    def release(self) -> None:
        self.shared.release()


def _union(parts: list[DataFrame]) -> DataFrame:
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part, allowMissingColumns=True)
    return out


def _probe(df: DataFrame, column: str) -> DataFrame:
    from pyspark.sql import functions as F

    return df.select(F.col(column).alias("_w"))


def _log(ctx: StepContext, table: str, key: str, probes: list[DataFrame]) -> DataFrame | None:
    """The rows of a state log whose key is in one of `probes` (None: no state, nothing asked)."""
    from pyspark.sql import functions as F

    state = ctx.state(table)
    if state is None or not probes:
        return None
    keys = probes[0] if len(probes) == 1 else _union(probes)
    return state.join(F.broadcast(keys), state[key] == keys["_w"], "left_semi")


def batch_frames(ctx: StepContext, spec: FkJoinSpec, cols: FkColumns,
                 marked: dict[str, DataFrame], types: dict[str, DataType],
                 fk_type: DataType, *, verify_hash: bool = True) -> BatchFrames:
    """Wire one batch. `marked`: each side's new rows with EXPIRED (sides without new rows
    absent); `types`: each side's value struct type."""
    from pyspark.sql import functions as F

    # The shared frames hold both sides' new rows: sized by their sum.
    frames = BatchFrames(SharedFrames(worth_checkpointing(ctx.new_rows("left", "right"))))
    new_left, new_right = marked.get("left"), marked.get("right")
    left_struct = state_struct("left", types["left"], fk_type)
    left_absent = state_struct("left", types["left"], fk_type, present=False)
    right_struct = state_struct("right", types["right"], None)
    right_absent = state_struct("right", types["right"], None, present=False)
    subs = None
    if new_right is not None:
        subs = keyed_state(ctx.state(SUBSCRIPTIONS), new_right, S_FK, keys_key=cols.right.key,
                           row_key=(S_FK, S_PK))
        subs = None if subs is None else frames.cache(subs.where(F.col(S_LIVE)))
    lhs = _log(ctx, LHS, cols.key, [_probe(df, c) for df, c in
                                    ((new_left, cols.left.key), (subs, S_PK)) if df is not None])
    lhs_rows = None if lhs is None else frames.cache(state_window_rows(lhs, cols.key, left_struct))
    if new_left is not None:
        rows = _union([update_rows(new_left, "left", cols),
                       *([] if lhs_rows is None else [lhs_rows])])
        decided = decide(rows, "left", left_absent, versioned=spec.left.versioned)
        frames.left = frames.cache(with_messages(decided.where(F.col(KIND) == UPDATE), spec.join))
        frames.messages = message_rows(frames.left)
    right_parts, probes = [], []
    if new_right is not None:
        right_parts.append(update_rows(new_right, "right", cols))
        probes.append(_probe(new_right, cols.right.key))
    if frames.messages is not None:
        right_parts.append(as_window_rows(frames.messages))
        probes.append(_probe(frames.messages, FK))
    responses = []
    right_tl = None
    if right_parts:
        rhs = _log(ctx, RHS, cols.right.key, probes)
        if rhs is not None:
            right_parts.append(state_window_rows(rhs, cols.right.key, right_struct))
        right = frames.cache(decide(_union(right_parts), "right", right_absent,
                                    versioned=spec.right.versioned))
        if new_right is not None:
            frames.right = right.where(F.col(KIND) == UPDATE)
            right_tl = timeline(frames.right)
        if frames.messages is not None:
            responses.append(answers(right.where(F.col(KIND) == MESSAGE)))
    versions = _versions(subs, frames.messages, frames.left)
    if right_tl is not None and versions is not None:
        responses.append(fan_out(right_tl, versions))
    if responses:
        left_tl = None if frames.left is None else timeline(frames.left)
        frames.guarded = guarded(_union(responses), left_tl, lhs_rows, left_absent,
                                 verify_hash=verify_hash)
    return frames


def _versions(subs: DataFrame | None, messages: DataFrame | None,
              left: DataFrame | None) -> DataFrame | None:
    """Every subscription (`_fk`, `_pk`, `_hash`) the batch saw, with `_vord` where it was
    made (the store's: -1, before the batch; the batch's own: the first of the same hash) and
    `_moved` (the batch updated its left key)."""
    from pyspark.sql import functions as F

    parts = []
    if subs is not None:
        stored = subs.select(F.col(S_FK).alias(FK), F.col(S_PK).alias(PK),
                             F.col(S_HASH).alias(HASH), F.lit(-1).cast("long").alias(VORD))
        if left is not None:
            moved = left.where(F.col(APPLIED)).select(F.col(K).alias("_mk")).distinct()
            stored = stored.join(F.broadcast(moved), F.col(PK) == F.col("_mk"), "left").select(
                "*", F.col("_mk").isNotNull().alias(MOVED)).drop("_mk")
        else:
            stored = stored.withColumn(MOVED, F.lit(False))
        parts.append(stored)
    if messages is not None:
        puts = messages.where(F.col(FK).isNotNull() & F.col(INSTR).isin(PNULL, PONLY))
        parts.append(puts.select(FK, PK, HASH, F.col(ORD).alias(VORD), F.lit(True).alias(MOVED)))
    if not parts:
        return None
    return _union(parts).groupBy(FK, PK, HASH).agg(F.min(VORD).alias(VORD),
                                                   F.max(MOVED).alias(MOVED))
