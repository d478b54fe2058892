"""The `stream_table_join` reference processor: the specification, one record at a time.

Seed 000 (KIP-914): "when a new record (from the stream-side) arrives at a stream-table join
processor, the processor performs a get(key) lookup on the table materialization [...]. If the
table store is versioned, the behavior will be to call get(key, timestamp) instead, where
timestamp is the stream-side record's timestamp." When that timestamp is older than the table's
history retention, get returns null (unless the latest version is older still) and the null is
handled like any other: an inner join emits nothing, a left join emits a null table value.

Seed 001 (KIP-923): a stream record joined on arrival sees only the table versions that have
arrived so far, so the result depends on arrival interleaving. With a grace period the stream
side is buffered "until it is certain that the record in the table side is the right one for
its timestamp": a buffered record is joined when the buffer's stream time has moved `grace` past
it, in timestamp order. The seed's example (table rows at ts 1, 2, 3; stream d@4, e@1, f@2, g@2,
h@3; grace 10) always yields 2eb, 3fc, 2gx, 3hy, 1da.

The rules, exactly as this processor applies them:

- Table records update the table store (versioned or not) and emit nothing. A put the versioned
  store refuses as older than its history retention is counted (`table_expired`); a table record
  with a null key is counted (`table_skipped_null_key`) as Kafka skips it.
- A stream record with a null value is skipped, as Kafka does (`skipped_null_value`).
- The table key is the stream key, or the `table_key` field of the stream value. A null table key
  joins to nothing: a left join emits the record with a null table value, an inner join skips it
  (`skipped_null_key`).
- Without `grace_ms` the record is joined on arrival. With it, the record (a left join's null-key
  record too) is put into the buffer; the buffer's stream time is the largest ts of the stream
  records put into it (table records, late records and skipped records do not move it). After
  each put, every buffered record with ts <= stream time - grace is evicted in (ts, arrival)
  order and joined as of its ts, against the table as it is at eviction. Nothing flushes the
  buffer at end of input (`buffered` says how many records wait).
- A stream record with ts < stream time - grace is late and follows `late`: `join` (joined at once,
  Kafka Streams' behaviour; `late_joined`), `drop` (the KIP text; `late_dropped`) or `quarantine`
  (emitted as a quarantine item with a reason; `quarantined`).
- The join looks up get(table_key, stream ts) in a versioned table, the latest by arrival in an
  unversioned one; table keys are equal by value and JSON type (`joins.core.keys`: the table key
  1 does not answer a lookup of 1.0). It emits `{"key": stream key, "value": [stream value,
  table value or null], "ts": stream ts}`; an inner join emits nothing when the lookup is null
  (`inner_unmatched`).
- Micro-batches (`joins.microbatch`): a batch's table records are applied before its stream
  records, and its lookups judge history retention against the table's stream time at the start
  of the batch (`begin_batch`): in event-time order the table would not have run ahead of them,
  so a batch covering days of event time loses no lookup to retention (a new join over existing
  data equals the backfill of its days). One record per batch is record-at-a-time processing.

`metrics` counts every stream record that was skipped, dropped, quarantined, joined late, left
unmatched by an inner join or still buffered, and every table record the table did not take, so
that nothing is ever lost silently.
"""

from __future__ import annotations

import heapq
from typing import Any, Generic, Protocol, TypeVar

from joins.core.operator import Item
from joins.core.store import TableStore, VersionedStore, make_store
from joins.operators.stream_table_join.late import late_reason_text
from joins.operators.stream_table_join.spec import StreamTableJoinSpec, StreamTableRecord

METRIC_NAMES: tuple[str, ...] = (
    "skipped_null_value",       # stream records with a null value (Kafka skips them)
    "skipped_null_key",         # inner join: stream records whose table key is null
    "inner_unmatched",          # inner join: the table lookup was null, nothing emitted
    "late_joined",              # late stream records joined at once (late = join)
    "late_dropped",             # late stream records dropped (late = drop)
    "quarantined",              # late stream records emitted as quarantine items
    "table_expired",            # table puts older than the versioned table's history retention
    "table_skipped_null_key",   # table records with a null key
    "lookup_beyond_history_retention",  # lookups only the latest version could answer (seed 000)
    "buffered",                 # stream records waiting in the grace buffer right now
)


class Arrived(Protocol):
    """What the buffer needs of a record: its ts and its arrival index (unique)."""

    @property
    def ts(self) -> int: ...

    @property
    def i(self) -> int: ...


R = TypeVar("R", bound=Arrived)


class GraceBuffer(Generic[R]):
    """The stream-side buffer of KIP-923, ordered by (ts, arrival). The Spark engine's
    small-batch decision (`sequential.py`) runs this same buffer inside one Spark task."""

    def __init__(self, grace_ms: int) -> None:
        self.grace_ms = grace_ms
        self.stream_time: int | None = None
        # (ts, arrival index, record, table key): (ts, i) is unique, so records never compare.
        self._heap: list[tuple[int, int, R, Any]] = []

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def late_bound(self) -> int | None:
        """Stream time minus grace: older records are late, records up to it are evicted."""
        return None if self.stream_time is None else self.stream_time - self.grace_ms

    def is_late(self, ts: int) -> bool:
        bound = self.late_bound
        return bound is not None and ts < bound

    def put(self, record: R, table_key: Any) -> None:
        heapq.heappush(self._heap, (record.ts, record.i, record, table_key))
        self.stream_time = record.ts if self.stream_time is None else max(self.stream_time, record.ts)

    def evict(self) -> list[tuple[R, Any]]:
        """Remove and return, in (ts, arrival) order, every record with ts <= stream time - grace."""
        bound = self.late_bound
        evicted: list[tuple[R, Any]] = []
        while bound is not None and self._heap and self._heap[0][0] <= bound:
            _ts, _i, record, table_key = heapq.heappop(self._heap)
            evicted.append((record, table_key))
        return evicted


class StreamTableJoinProcessor:
    """Record-at-a-time stream-table join (inner or left), optionally with a grace buffer."""

    def __init__(self, spec: StreamTableJoinSpec) -> None:
        self.spec = spec
        self.table: TableStore = make_store(spec.table.versioned, spec.table.retention_ms)
        self.buffer: GraceBuffer[StreamTableRecord] | None = (
            None if spec.grace_ms is None else GraceBuffer(spec.grace_ms))
        self.metrics: dict[str, int] = dict.fromkeys(METRIC_NAMES, 0)

    def begin_batch(self) -> None:
        """A micro-batch's lookups keep the table's retention clock of its start
        (`joins.microbatch`); one record per batch is record-at-a-time processing."""
        if isinstance(self.table, VersionedStore):
            self.table.pin_reads()

    def end_batch(self) -> None:
        if isinstance(self.table, VersionedStore):
            self.table.unpin_reads()

    def process(self, record: StreamTableRecord) -> list[Item]:
        if record.side == "table":
            self._put_table(record)
            return []
        return self._on_stream(record)

    # -- table side -------------------------------------------------------------------------

    def _put_table(self, record: StreamTableRecord) -> None:
        if record.key is None:
            self.metrics["table_skipped_null_key"] += 1
            return
        if self.table.put(record.key, record.value, record.ts).outcome == "expired":
            self.metrics["table_expired"] += 1

    # -- stream side ------------------------------------------------------------------------

    def _on_stream(self, record: StreamTableRecord) -> list[Item]:
        if record.value is None:
            self.metrics["skipped_null_value"] += 1
            return []
        table_key = self.spec.lookup_key(record.key, record.value, index=record.i)
        if table_key is None and self.spec.join == "inner":
            self.metrics["skipped_null_key"] += 1
            return []
        if self.buffer is None:
            return self._join(record, table_key)
        if self.buffer.is_late(record.ts):
            return self._on_late(record, table_key, self.buffer)
        self.buffer.put(record, table_key)
        out: list[Item] = []
        for buffered, buffered_key in self.buffer.evict():
            out.extend(self._join(buffered, buffered_key))
        self.metrics["buffered"] = len(self.buffer)
        return out

    def _on_late(self, record: StreamTableRecord, table_key: Any,
                 buffer: GraceBuffer[StreamTableRecord]) -> list[Item]:
        if self.spec.late == "join":
            self.metrics["late_joined"] += 1
            return self._join(record, table_key)
        if self.spec.late == "drop":
            self.metrics["late_dropped"] += 1
            return []
        self.metrics["quarantined"] += 1
        assert buffer.stream_time is not None  # a late record needs a stream time to be late
        # In ISO times and a duration; the Spark engine spells it alike (`late.py`).
        reason = late_reason_text(record.ts, buffer.stream_time, buffer.grace_ms)
        return [{"quarantined": {"key": record.key, "value": record.value, "ts": record.ts},
                 "reason": reason}]

    def _join(self, record: StreamTableRecord, table_key: Any) -> list[Item]:
        table_value = None if table_key is None else self._lookup(table_key, record.ts)
        if table_value is None and self.spec.join == "inner":
            self.metrics["inner_unmatched"] += 1
            return []
        return [{"key": record.key, "value": [record.value, table_value], "ts": record.ts}]

    def _lookup(self, table_key: Any, ts: int) -> Any:
        """get(key, ts) on a versioned table (seed 000), get(key) on an unversioned one."""
        if isinstance(self.table, VersionedStore):
            if self.table.is_read_beyond_retention(ts):
                self.metrics["lookup_beyond_history_retention"] += 1
            found = self.table.get(table_key, ts)
        else:
            found = self.table.get(table_key)
        return None if found is None else found.value
