"""The right-hand side of KIP-213 (seed 004): the subscription store, the right table, and the
two ways a response is born.

- A subscription arrives: update the subscription store under its `CombinedKey`, then answer
  according to the instruction (`SubscriptionJoin` in Kafka Streams).
- A right row changes: prefix-scan the subscription store for that foreign key and answer every
  subscriber, each with the hash it subscribed with (`ForeignTableJoin` in Kafka Streams).

Timestamps, as Kafka Streams sets them (the LHS emits a result with its response's ts):
- an answer to a subscription carries the larger of the subscribing left update's ts and the ts
  of the right row's current value, or the left update's ts when there is no current right value
  (absent, deleted, or a null foreign key) (`SubscriptionJoinProcessorSupplier`);
- a fan-out response carries the right update's own ts, whatever the subscriber's ts
  (`ForeignTableJoinProcessorSupplier` forwards the right record with its timestamp), so a
  right update older than a left row yields a result older than that row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from joins.core.keys import KeyId, key_id
from joins.core.store import make_store
from joins.operators.fk_join.protocol import (
    CombinedKey,
    Instruction,
    ResponseMessage,
    SubscriptionMessage,
    SubscriptionResponseWrapper,
)
from joins.operators.fk_join.spec import FkJoinRecord, FkJoinSpec


@dataclass(frozen=True)
class SubscriptionEntry:
    """What the subscription store keeps per CombinedKey: the subscriber's value hash and the
    timestamp of the left update that subscribed (kept as Kafka's timestamped subscription store
    keeps it; a fan-out response does not use it)."""

    hash: str | None
    ts: int


class SubscriptionStore:
    """CombinedKey -> SubscriptionEntry with a prefix scan by foreign key."""

    def __init__(self) -> None:
        self._by_prefix: dict[KeyId, dict[KeyId, tuple[CombinedKey, SubscriptionEntry]]] = {}

    def put(self, key: CombinedKey, entry: SubscriptionEntry) -> None:
        self._by_prefix.setdefault(key.prefix, {})[key_id(key.primary_key)] = (key, entry)

    def delete(self, key: CombinedKey) -> None:
        subscribers = self._by_prefix.get(key.prefix)
        if subscribers is None:
            return
        subscribers.pop(key_id(key.primary_key), None)
        if not subscribers:
            del self._by_prefix[key.prefix]

    def get(self, key: CombinedKey) -> SubscriptionEntry | None:
        found = self._by_prefix.get(key.prefix, {}).get(key_id(key.primary_key))
        return None if found is None else found[1]

    def prefix_scan(self, foreign_key: Any) -> list[tuple[CombinedKey, SubscriptionEntry]]:
        """Every subscriber of `foreign_key`, in primary-key order (as a byte-ordered store)."""
        subscribers = self._by_prefix.get(key_id(foreign_key), {})
        return [subscribers[pk] for pk in sorted(subscribers)]

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_prefix.values())


class RightSide:
    """RHS processor: right table, subscription store, subscription join and fan-out."""

    def __init__(self, spec: FkJoinSpec) -> None:
        self.spec = spec
        self.table = make_store(spec.right.versioned, spec.right.retention_ms)
        self.subscriptions = SubscriptionStore()
        # Updates and subscriptions that produced no response (reported, never silently lost).
        self.metrics: dict[str, int] = {
            "out_of_order_ignored": 0,
            "expired": 0,
            "null_foreign_key_subscription_dropped": 0,
        }
        self.traffic: dict[str, int] = {"responses_sent": 0}

    def on_subscription(self, message: SubscriptionMessage) -> list[ResponseMessage]:
        key, wrapper = message.key, message.value
        instruction = wrapper.instruction
        if key.foreign_key is None:
            # Only a left join sends a null FK, to get its [left, null] answer; nothing to store.
            if instruction is not Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
                self.metrics["null_foreign_key_subscription_dropped"] += 1
                return []
            return self._answer(message, None, message.ts, propagate_if_null=True)
        if instruction.deletes_subscription:
            self.subscriptions.delete(key)
        else:
            self.subscriptions.put(key, SubscriptionEntry(wrapper.hash, message.ts))
        row = self.table.get(key.foreign_key)
        ts = message.ts if row is None else max(message.ts, row.valid_from)
        right = None if row is None else row.value
        if instruction is Instruction.DELETE_KEY_NO_PROPAGATE:
            return []
        if instruction is Instruction.DELETE_KEY_AND_PROPAGATE:
            return self._answer(message, None, ts, propagate_if_null=True)
        if instruction is Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            return self._answer(message, right, ts, propagate_if_null=right is None)
        # PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE
        return [] if row is None else self._answer(message, right, ts, propagate_if_null=False)

    def on_update(self, record: FkJoinRecord) -> list[ResponseMessage]:
        """Apply a right update; one response per subscriber of that key (none if out of order)."""
        put = self.table.put(record.key, record.value, record.ts)
        if put.outcome == "expired":
            self.metrics["expired"] += 1
            return []
        if put.outcome == "out_of_order":
            # Seed 000 / KIP-914: kept as history, but an out-of-order right update fans out nothing.
            self.metrics["out_of_order_ignored"] += 1
            return []
        partition = key_id(record.key)
        responses = [
            ResponseMessage(
                primary_key=combined.primary_key,
                value=SubscriptionResponseWrapper(entry.hash, record.value,
                                                  propagate_if_null=record.value is None),
                ts=record.ts,
                source_partition=partition,
            )
            for combined, entry in self.subscriptions.prefix_scan(record.key)
        ]
        self.traffic["responses_sent"] += len(responses)
        return responses

    def _answer(self, message: SubscriptionMessage, right: Any, ts: int, *,
                propagate_if_null: bool) -> list[ResponseMessage]:
        self.traffic["responses_sent"] += 1
        return [ResponseMessage(
            primary_key=message.key.primary_key,
            value=SubscriptionResponseWrapper(message.value.hash, right, propagate_if_null),
            ts=ts,
            source_partition=message.partition,
        )]
