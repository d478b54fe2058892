"""The messages of KIP-213's subscription/response protocol (seed 004).

The left-hand side (LHS, "this" table, many rows per foreign key) never looks into the right table
directly. For each left update it sends `SubscriptionWrapper`s, keyed by `CombinedKey(fk, pk)`, to
the right-hand side (RHS, "other" table, keyed by the foreign key); the RHS answers with
`SubscriptionResponseWrapper`s keyed by the primary key, and also sends one to every subscriber
of a foreign key when that right row changes. Each subscription carries a hash of the left value
that caused it and each response echoes it back, so the LHS can recognise and discard a response
computed for a left value that has since changed (seed 004, "Original Value Hash").

Keys and values are JSON values. Keys (primary and foreign) are compared by `joins.core.keys`
(value and JSON type: the foreign key 1.0 does not reference the right key 1); a left value is
hashed from its canonical JSON, as Kafka hashes its serialized bytes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from typing import Any

from joins.core.fields import canonical_json
from joins.core.keys import KeyId, key_id


def value_hash(value: Any) -> str | None:
    """Hash of a left value as sent with a subscription; a tombstone (None) hashes to None, as
    Kafka hashes the serialized new value and sends no hash for a delete."""
    if value is None:
        return None
    return hashlib.blake2b(canonical_json(value).encode(), digest_size=16).hexdigest()


class Instruction(Enum):
    """What the RHS does with a subscription (seed 004, "Tombstones & Foreign Key Changes")."""

    # Remove the subscription; answer nothing (the FK changed: only the new FK's answer counts).
    DELETE_KEY_NO_PROPAGATE = "DELETE_KEY_NO_PROPAGATE"
    # Remove the subscription; answer null so the LHS can delete the old join result.
    DELETE_KEY_AND_PROPAGATE = "DELETE_KEY_AND_PROPAGATE"
    # Store the subscription; answer with the right value, or with null if there is none, so a
    # now-stale earlier join result is wiped out.
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = "PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE"
    # Store the subscription; answer only if there is a right value (nothing to wipe out).
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE"

    @property
    def deletes_subscription(self) -> bool:
        return self in (Instruction.DELETE_KEY_NO_PROPAGATE, Instruction.DELETE_KEY_AND_PROPAGATE)


@dataclass(frozen=True)
class CombinedKey:
    """The subscription key: foreign key first so that one FK's subscribers are one prefix.

    `foreign_key` is None only for a left-join row with a null foreign key: Kafka still sends it
    through the RHS (never stored there) to get the `[left, null]` answer back.
    """

    foreign_key: Any
    primary_key: Any

    @property
    def prefix(self) -> KeyId:
        return key_id(self.foreign_key)

    @property
    def sort_key(self) -> tuple[KeyId, KeyId]:
        # The order a byte-ordered store (RocksDB in Kafka) would scan: FK prefix, then PK.
        return (self.prefix, key_id(self.primary_key))


@dataclass(frozen=True)
class SubscriptionWrapper:
    """The value of a subscription message: the left value's hash and the instruction."""

    hash: str | None
    instruction: Instruction


@dataclass(frozen=True)
class SubscriptionMessage:
    """One record on the subscription topic (LHS -> RHS), partitioned by the foreign key.
    `ts` is the timestamp of the left update that caused it."""

    key: CombinedKey
    value: SubscriptionWrapper
    ts: int

    @property
    def partition(self) -> KeyId:
        return self.key.prefix


@dataclass(frozen=True)
class SubscriptionResponseWrapper:
    """The answer (RHS -> LHS). `foreign_value` None = no right row (or a right tombstone);
    `propagate_if_null` says whether such a null must reach the output (seed 004 step 7)."""

    original_value_hash: str | None
    foreign_value: Any
    propagate_if_null: bool


@dataclass(frozen=True)
class ResponseMessage:
    """One record on the response topic, keyed by the primary key. `source_partition` is the
    foreign-key partition of the RHS task that sent it: responses from one RHS partition arrive
    in order, responses from different ones may interleave (the race of seed 004)."""

    primary_key: Any
    value: SubscriptionResponseWrapper
    ts: int
    source_partition: KeyId
