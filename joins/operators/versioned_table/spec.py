"""Configuration and input records of the `versioned_table` operator (seeds 000/002, KIP-889/914).

The operator is the versioned store itself, driven op by op, so that its rules (stream time,
history retention, tombstones, equal timestamps) are pinned by scenarios of their own.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictInt

from joins.core.keys import TableKey
from joins.core.time import DurationMs
from joins.spec import Record, Spec, parse_record

OPERATOR = "versioned_table"


class VersionedTableSpec(Spec):
    """`history_retention_ms`: how far behind the store's stream time a put is still stored and a
    timestamped get still answered from history. It doubles as the store's grace period."""

    history_retention_ms: DurationMs


class _KeyedOp(Record):
    i: StrictInt
    # A store cannot hold a null key (Kafka throws); refusing it here names the record.
    key: TableKey = Field(...)


class PutOp(_KeyedOp):
    """`put(key, value, ts)`; a null value is a tombstone, an empty string is a value."""

    op: Literal["put"]
    # Required even when null, so that a forgotten value never turns silently into a delete.
    value: Any = Field(...)
    ts: StrictInt


class GetOp(_KeyedOp):
    """`get(key, as_of)`; `as_of` null or absent reads the latest version."""

    op: Literal["get"]
    as_of: StrictInt | None = None


class _OpOnly(Record):
    # Used only to report an unknown or missing `op` with the same wording as other fields.
    model_config = ConfigDict(extra="allow")
    op: Literal["put", "get"]


VersionedTableOp = PutOp | GetOp


def parse_versioned_table_record(raw: Any, index: int) -> VersionedTableOp:
    """Validate one op; errors name the record index and the field (`op`, `ts`, `as_of`, ...)."""
    op = raw.get("op") if isinstance(raw, dict) else None
    if op == "put":
        return parse_record(PutOp, raw, index=index, operator=OPERATOR)
    if op == "get":
        return parse_record(GetOp, raw, index=index, operator=OPERATOR)
    parse_record(_OpOnly, raw, index=index, operator=OPERATOR)
    raise AssertionError("unreachable: _OpOnly accepts only 'put' and 'get'")
