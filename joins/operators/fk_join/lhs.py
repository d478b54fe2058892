"""The left-hand side of KIP-213 (seed 004): the left table, the subscription sender and the
response join.

The LHS holds the left table. A left update becomes subscription messages for the RHS (which
instructions, and to which foreign keys, is `plan_subscriptions`); a response from the RHS is
checked against the hash of the *current* left value and, if still current, turned into the
join result for that primary key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from joins.core.keys import keys_equal
from joins.core.operator import Item
from joins.core.store import make_store
from joins.operators.fk_join.protocol import (
    CombinedKey,
    Instruction,
    ResponseMessage,
    SubscriptionMessage,
    SubscriptionWrapper,
    value_hash,
)
from joins.operators.fk_join.spec import FkJoinRecord, FkJoinSpec, JoinType

# Which instruction table the LHS uses.
# - "kafka": Kafka Streams' (SubscriptionSendProcessorSupplier): an inner join asks for a null
#   answer only when a previous result may have to be wiped out, so an insert, or an update that
#   keeps its foreign key, is answered only if a right row exists. This is the default and what
#   every scenario pins.
# - "respond_always": the inner join uses the left join's table, so every left update is
#   answered, a null answer included. It costs redundant tombstones (an unmatched insert emits a
#   tombstone), but unlike "kafka" it still converges when responses are delayed past the next
#   update of the same key (see tests/reference/test_fk_join.py, the delete-then-insert race).
InstructionTable = Literal["kafka", "respond_always"]


@dataclass(frozen=True)
class LeftChange:
    """A left update as the subscription sender sees it: was there a value before and after,
    and which foreign key did each reference (None = null foreign key or no value)."""

    old_present: bool
    old_fk: Any
    new_present: bool
    new_fk: Any

    @property
    def foreign_key_changed(self) -> bool:
        return not keys_equal(self.old_fk, self.new_fk)


def plan_subscriptions(join: JoinType, change: LeftChange,
                       table: InstructionTable = "kafka") -> list[tuple[Any, Instruction]]:
    """(foreign key, instruction) of each subscription message a left update sends, in order."""
    if join == "left" or table == "respond_always":
        return _left_join_plan(change)
    return _inner_join_plan(change)


def _left_join_plan(c: LeftChange) -> list[tuple[Any, Instruction]]:
    if not c.old_present and not c.new_present:
        return []  # deleting an absent row: nothing was joined, nothing to answer
    plan: list[tuple[Any, Instruction]] = []
    if c.old_present and c.old_fk is not None and c.foreign_key_changed:
        # The old FK lives on another RHS partition: unsubscribe there, without an answer; the
        # answer to the new subscription below replaces the old result.
        plan.append((c.old_fk, Instruction.DELETE_KEY_NO_PROPAGATE))
    # Every left update is answered so a left join can always emit [left, right-or-null]. For a
    # delete or a null FK the "subscription" goes to the null FK: never stored, answered with null.
    plan.append((c.new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
    return plan


def _inner_join_plan(c: LeftChange) -> list[tuple[Any, Instruction]]:
    subscribed = c.old_present and c.old_fk is not None
    if not c.new_present:
        # Delete: the old result (if any) must become a tombstone, through the old FK's RHS.
        return [(c.old_fk, Instruction.DELETE_KEY_AND_PROPAGATE)] if subscribed else []
    if c.new_fk is None:
        # A null FK joins nothing; if the old FK may have joined, unsubscribe it with a null answer.
        return [(c.old_fk, Instruction.DELETE_KEY_AND_PROPAGATE)] if subscribed else []
    if not subscribed:
        # Insert (or a previous null FK): no previous result to wipe out, answer only on a match.
        return [(c.new_fk, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)]
    if c.foreign_key_changed:
        return [(c.old_fk, Instruction.DELETE_KEY_NO_PROPAGATE),
                (c.new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)]
    # Same FK: if it does not match now, the old value did not match either, so no null is needed.
    return [(c.new_fk, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)]


class LeftSide:
    """LHS processor: left table, subscription sender, response join."""

    def __init__(self, spec: FkJoinSpec, *, instruction_table: InstructionTable = "kafka",
                 verify_hash: bool = True) -> None:
        self.spec = spec
        self.instruction_table = instruction_table
        # Test-only switch: False joins every response with the current left value, which is
        # exactly the stale-result bug seed 004's hash exists to prevent.
        self.verify_hash = verify_hash
        self.table = make_store(spec.left.versioned, spec.left.retention_ms)
        # Updates and responses that produced no result (reported, never silently lost).
        self.metrics: dict[str, int] = {
            "out_of_order_ignored": 0,
            "expired": 0,
            "null_foreign_key_skipped": 0,
            "stale_response_discarded": 0,
            "null_response_not_propagated": 0,
        }
        # Protocol traffic, for tests and curiosity.
        self.traffic: dict[str, int] = {"subscriptions_sent": 0, "results_emitted": 0}

    def current_value(self, primary_key: Any) -> Any:
        row = self.table.get(primary_key)
        return None if row is None else row.value

    def on_update(self, record: FkJoinRecord) -> list[SubscriptionMessage]:
        """Apply a left update; the subscription messages it sends (none if out of order)."""
        new_value = record.value
        # Read the FK before touching state, so that a malformed row leaves the table unchanged.
        new_fk = None if new_value is None else self.spec.extract_foreign_key(new_value,
                                                                               index=record.i)
        put = self.table.put(record.key, new_value, record.ts)
        if put.outcome == "expired":
            self.metrics["expired"] += 1
            return []
        if put.outcome == "out_of_order":
            # Seed 000 / KIP-914: an out-of-order update of a versioned table is kept as history
            # but triggers no join result, so no subscription either.
            self.metrics["out_of_order_ignored"] += 1
            return []
        inner_kafka = self.spec.join == "inner" and self.instruction_table == "kafka"
        if new_value is not None and new_fk is None and inner_kafka:
            # Kafka counts the row as dropped: it joins nothing and gets no answer of its own.
            self.metrics["null_foreign_key_skipped"] += 1
        old_value = None if put.previous is None else put.previous.value
        change = LeftChange(
            old_present=old_value is not None,
            old_fk=None if old_value is None else self.spec.extract_foreign_key(old_value),
            new_present=new_value is not None,
            new_fk=new_fk,
        )
        wrapper_hash = value_hash(new_value)
        messages = [
            SubscriptionMessage(CombinedKey(fk, record.key),
                                SubscriptionWrapper(wrapper_hash, instruction), record.ts)
            for fk, instruction in plan_subscriptions(self.spec.join, change, self.instruction_table)
        ]
        self.traffic["subscriptions_sent"] += len(messages)
        return messages

    def on_response(self, message: ResponseMessage) -> list[Item]:
        """Seed 004 steps 6-8: drop a stale response, else emit the join result (or tombstone)."""
        current = self.current_value(message.primary_key)
        response = message.value
        if self.verify_hash and value_hash(current) != response.original_value_hash:
            # Computed for a left value that has since changed: the response to the current
            # value is still on its way (or was already applied), so this one must not be.
            self.metrics["stale_response_discarded"] += 1
            return []
        right = response.foreign_value
        if right is None and not response.propagate_if_null:
            self.metrics["null_response_not_propagated"] += 1
            return []
        # No left row (a delete's answer), or an inner join with no right row: a tombstone.
        tombstone = current is None or (right is None and self.spec.join == "inner")
        result = None if tombstone else [current, right]
        self.traffic["results_emitted"] += 1
        return [{"key": message.primary_key, "value": result, "ts": message.ts}]
