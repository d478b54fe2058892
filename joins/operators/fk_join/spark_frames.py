"""The frames of one foreign-key micro-batch, wired (docs/fk_join.md, "a batch").

    left changes ─▶ lhs (batch's keys and the fan-out's subscribers) ─▶ left decided ─▶ messages
    right changes ─▶ rhs (batch's keys and the messages' foreign keys) ─▶ right decided
    subscriptions (the right changes' keys) ─▶ versions ─▶ fan-out
    messages ─▶ answers;  answers + fan-out ─▶ guard ─▶ compacted results

State is read only for the keys the batch needs, each read once: the batch's keys are
broadcast into the scan (`joins.changelog.keyed_state`). What is read twice is persisted:
the state rows read, and the decided updates (the output, the state writes and the
subscription write all read them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    PK,
    PNULL,
    PONLY,
    VORD,
    answers,
    fan_out,
    guard,
    state_rows_of,
    subscription_messages,
    with_messages,
)
from joins.operators.fk_join.spark_sides import (
    APPLIED,
    ORD,
    K,
    side_updates,
    state_struct,
    timeline,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

    from joins.incremental import StepContext
    from joins.operators.fk_join.spec import FkJoinSpec


@dataclass
class BatchFrames:
    """What a batch computed; `left` / `right`: decided updates (None: no changes)."""

    left: DataFrame | None
    right: DataFrame | None
    messages: DataFrame | None
    guarded: DataFrame | None
    cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def _keys(df: DataFrame, column: str) -> DataFrame:
    from pyspark.sql import functions as F

    return df.select(F.col(column).alias("_w"))


def _union(parts: list[DataFrame]) -> DataFrame:
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def batch_frames(ctx: StepContext, spec: FkJoinSpec, cols: FkColumns,
                 marked: dict[str, DataFrame], types: dict[str, DataType],
                 fk_type: DataType, *, verify_hash: bool = True) -> BatchFrames:
    """Wire one batch. `marked`: each side's new rows with EXPIRED (sides without new rows
    absent); `types`: each side's value struct type."""
    from pyspark.sql import functions as F

    frames = BatchFrames(None, None, None, None)

    def cache(df: DataFrame) -> DataFrame:
        frames.cached.append(df.persist())
        return df

    new_left, new_right = marked.get("left"), marked.get("right")
    subs = None
    if new_right is not None:
        subs = keyed_state(ctx.state(SUBSCRIPTIONS), new_right, S_FK, keys_key=cols.right.key,
                           row_key=(S_FK, S_PK))
        subs = None if subs is None else cache(subs.where(F.col(S_LIVE)))
    wanted = [_keys(df, c) for df, c in ((new_left, cols.left.key), (subs, S_PK)) if df is not None]
    left_current = None
    if wanted:
        left_current = keyed_state(ctx.state(LHS), _union(wanted), cols.key, keys_key="_w")
        left_current = None if left_current is None else cache(left_current)
    if new_left is not None:
        decided = side_updates(new_left, left_current, "left", cols, versioned=spec.left.versioned)
        frames.left = cache(with_messages(decided, spec.join))
        frames.messages = subscription_messages(frames.left)
    right_wanted = [_keys(df, c) for df, c in ((new_right, cols.right.key), (frames.messages, FK))
                    if df is not None]
    right_current = None
    if right_wanted:
        right_current = keyed_state(ctx.state(RHS), _union(right_wanted), cols.right.key,
                                    keys_key="_w")
        right_current = None if right_current is None else cache(right_current)
    if new_right is not None:
        frames.right = cache(side_updates(new_right, right_current, "right", cols,
                                          versioned=spec.right.versioned))
    left_tl = None if frames.left is None else timeline(frames.left)
    right_tl = None if frames.right is None else timeline(frames.right)
    responses: list[DataFrame] = []
    if frames.messages is not None:
        absent = state_struct("right", types["right"], None, None, cols)
        right_rows = state_rows_of(right_current, cols.right.key,
                                   state_struct("right", types["right"], None, right_current, cols))
        responses.append(answers(frames.messages, right_tl, right_rows, absent))
    if right_tl is not None:
        versions = _versions(subs, frames.messages)
        if versions is not None:
            moved = None if frames.left is None else frames.left.where(F.col(APPLIED)).select(K)
            responses.append(fan_out(right_tl, versions, moved))
    if responses:
        absent = state_struct("left", types["left"], fk_type, None, cols)
        left_rows = state_rows_of(left_current, cols.key,
                                  state_struct("left", types["left"], fk_type, left_current, cols))
        frames.guarded = guard(_union(responses), left_tl, left_rows, absent,
                               verify_hash=verify_hash)
    return frames


def _versions(subs: DataFrame | None, messages: DataFrame | None) -> DataFrame | None:
    """Every subscription (`_fk`, `_pk`, `_hash`) the batch saw, with `_vord`, where it was
    made: the store's (of the right changes' keys; -1, before the batch) and the ones the
    batch's left updates made (the first, of the same hash)."""
    from pyspark.sql import functions as F

    parts = []
    if subs is not None:
        parts.append(subs.select(F.col(S_FK).alias(FK), F.col(S_PK).alias(PK),
                                 F.col(S_HASH).alias(HASH), F.lit(-1).cast("long").alias(VORD)))
    if messages is not None:
        puts = messages.where(F.col(FK).isNotNull() & F.col(INSTR).isin(PNULL, PONLY))
        parts.append(puts.select(FK, PK, HASH, F.col(ORD).alias(VORD)))
    if not parts:
        return None
    return _union(parts).groupBy(FK, PK, HASH).agg(F.min(VORD).alias(VORD))
