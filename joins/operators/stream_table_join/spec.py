"""Configuration and input records of the `stream_table_join` operator (seeds 000 and 001).

Config (see FORMAT.md):

- `join`: `inner` | `left`. A stream-table join has no outer form: a table row alone is state,
  not an event, so there is nothing to emit for it.
- `table`: `{"versioned": bool, "history_retention_ms": int}`. A versioned table is looked up as
  of the stream record's timestamp (KIP-914, seed 000); an unversioned one by latest arrival.
- `grace_ms`: the stream-side buffer of KIP-923 (seed 001); null = no buffer.
- `late`: what a stream record older than the buffer's stream time minus grace gets:
  `join` (Kafka Streams' behaviour, the default), `drop` (the KIP text), `quarantine`.
- `table_key`: a field of the stream value naming the table key (global-table style); absent =
  the stream key.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, StrictStr, model_validator

from joins.core.time import DurationMs
from joins.core.versioned import VersionedInput
from joins.errors import InputRecordError, config_error
from joins.spec import Record, Spec, parse_record

OPERATOR = "stream_table_join"

LatePolicy = Literal["join", "drop", "quarantine"]


class StreamTableJoinSpec(Spec):
    join: Literal["inner", "left"]
    table: VersionedInput
    grace_ms: DurationMs | None = None
    late: LatePolicy = "join"
    table_key: StrictStr | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _settings_are_consistent(self) -> StreamTableJoinSpec:
        self.table.check(OPERATOR, "table.")
        if self.grace_ms is not None:
            if not self.table.versioned:
                # Buffered records are joined as of their own timestamp, which only a versioned
                # table can answer (Kafka Streams refuses a grace period on an unversioned table).
                raise config_error(OPERATOR, "grace_ms", "a grace period needs a versioned table "
                                   "(set table.versioned to true, or remove grace_ms)")
            retention = self.table.history_retention_ms
            assert retention is not None  # table.check guarantees it for a versioned table
            if self.grace_ms > retention:
                # A record held for grace_ms would be looked up beyond the table's history.
                raise config_error(OPERATOR, "grace_ms", f"grace_ms ({self.grace_ms}) must be <= "
                                   f"table.history_retention_ms ({retention}): a buffered record "
                                   f"would be looked up in history the table no longer keeps")
        elif self.late != "join":
            raise config_error(OPERATOR, "late", f"late = {self.late!r} needs grace_ms: without a "
                               "stream buffer no record is ever late, so the setting would do nothing")
        return self

    def lookup_key(self, stream_key: Any, stream_value: Any, *, index: int | None = None) -> Any:
        """The table key a stream record is joined on: the stream key, or the `table_key` field
        of the stream value (an absent field reads as null, a null table key)."""
        if self.table_key is None:
            return stream_key
        if not isinstance(stream_value, dict):
            raise InputRecordError(
                f"must be an object holding the field {self.table_key!r} named by config.table_key, "
                f"got {type(stream_value).__name__}",
                index=index, field="value", record=stream_value, source=f"{OPERATOR} input")
        return stream_value.get(self.table_key)


class StreamTableRecord(Record):
    """`{"i", "side": "stream" | "table", "key", "value", "ts"}`; key and value are required but
    may be null (a null table value is a tombstone; a null stream value is skipped)."""

    i: StrictInt
    side: Literal["stream", "table"]
    key: Any = Field(...)
    value: Any = Field(...)
    ts: StrictInt


def parse_stream_table_record(raw: Any, index: int) -> StreamTableRecord:
    return parse_record(StreamTableRecord, raw, index=index, operator=OPERATOR)


def batch_phase(record: StreamTableRecord) -> int:
    """The micro-batch rule: a batch's table records before its stream records."""
    return 0 if record.side == "table" else 1
