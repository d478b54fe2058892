"""The reference (record-at-a-time) foreign-key join: KIP-213's LHS and RHS processors wired
through two explicit queues, the subscription topic and the response topic (seed 004).

`process(record)` applies one input record and then drains both queues, so every item a record
causes is emitted right after it (`after_input` is well defined). The lower-level methods
(`process_left`, `process_right`, `deliver_to_rhs`, `deliver_to_lhs`) let a test hold messages
back and deliver them in any order, as in seed 004's stale-hash race.

Queue order models Kafka's partitioning: subscriptions are partitioned by foreign key, responses
by the RHS partition that sent them; within a partition messages stay in order, across
partitions they may interleave. `deliver_*` take a queue position so a driver can choose; a
driver that wants Kafka's guarantees delivers only the first pending message of a partition.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from joins.core.operator import Item
from joins.operators.fk_join.lhs import InstructionTable, LeftSide
from joins.operators.fk_join.protocol import ResponseMessage, SubscriptionMessage
from joins.operators.fk_join.rhs import RightSide
from joins.operators.fk_join.spec import FkJoinRecord, FkJoinSpec


class FkJoinProcessor:
    """Foreign-key table-table join, record at a time. Output items are
    `{"key": left_key, "value": [left_value, right_value_or_null] | null, "ts"}`."""

    def __init__(self, spec: FkJoinSpec, *, instruction_table: InstructionTable = "kafka",
                 verify_hash: bool = True) -> None:
        self.spec = spec
        self.lhs = LeftSide(spec, instruction_table=instruction_table, verify_hash=verify_hash)
        self.rhs = RightSide(spec)
        self.subscription_queue: deque[SubscriptionMessage] = deque()
        self.response_queue: deque[ResponseMessage] = deque()

    # -- record at a time ------------------------------------------------------------------

    def process(self, record: FkJoinRecord) -> list[Item]:
        if record.side == "left":
            self.process_left(record)
        else:
            self.process_right(record)
        return self.drain()

    def drain(self) -> list[Item]:
        """Deliver every pending message, subscriptions first, each queue in order."""
        out: list[Item] = []
        while self.subscription_queue or self.response_queue:
            if self.subscription_queue:
                self.deliver_to_rhs()
            else:
                out.extend(self.deliver_to_lhs())
        return out

    # -- protocol steps --------------------------------------------------------------------

    def process_left(self, record: FkJoinRecord) -> list[SubscriptionMessage]:
        """Apply a left update at the LHS; its subscriptions are queued, not delivered."""
        sent = self.lhs.on_update(record)
        self.subscription_queue.extend(sent)
        return sent

    def process_right(self, record: FkJoinRecord) -> list[ResponseMessage]:
        """Apply a right update at the RHS; its fan-out responses are queued, not delivered."""
        sent = self.rhs.on_update(record)
        self.response_queue.extend(sent)
        return sent

    def deliver_to_rhs(self, position: int = 0) -> list[ResponseMessage]:
        """Hand the subscription at `position` to the RHS; its responses are queued."""
        message = _take(self.subscription_queue, position)
        sent = self.rhs.on_subscription(message)
        self.response_queue.extend(sent)
        return sent

    def deliver_to_lhs(self, position: int = 0) -> list[Item]:
        """Hand the response at `position` to the LHS; the items it emits."""
        return self.lhs.on_response(_take(self.response_queue, position))

    # -- observation -----------------------------------------------------------------------

    @property
    def metrics(self) -> dict[str, int]:
        """Counters of what produced no result, both sides summed (`lhs.metrics` and
        `rhs.metrics` keep them per side)."""
        merged = dict(self.lhs.metrics)
        for name, count in self.rhs.metrics.items():
            merged[name] = merged.get(name, 0) + count
        return merged

    @property
    def traffic(self) -> dict[str, int]:
        """Protocol message counts: subscriptions sent, responses sent, results emitted."""
        return {**self.lhs.traffic, **self.rhs.traffic}


def _take(queue: deque[Any], position: int) -> Any:
    if not 0 <= position < len(queue):
        raise IndexError(f"no pending message at position {position} (queue holds {len(queue)})")
    message = queue[position]
    del queue[position]
    return message
