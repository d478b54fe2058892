"""The micro-batch rule, defined once for every engine.

Inside one micro-batch, records are processed by ascending *phase* (table-side records, and for
table-table joins each side's updates, before the stream-side records of that batch), in arrival
order within a phase. Outputs of a table result are compacted to the last value per key per batch
(an item's `old_value`, where it has one, is the one before the batch). With one record per batch
this is exactly record-at-a-time processing.

A stream-table join's lookups in a batch judge the versioned table's history retention against
the table's stream time at the start of the batch: its table records are applied first, but in
event-time order (as Kafka Streams processes existing topics) the table would not have run
ahead of the stream by more than grace <= history retention. So a batch that covers days of
event time (a new join over existing data, a pipeline resumed after a day) loses no lookup to
retention, and equals a backfill of its days.

Every emitted item carries `after_input`: the index of the last input record of its batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from joins.core.keys import KeyId, key_id
from joins.core.operator import BatchAware, Item, OperatorDefinition


def cut_batches(records: Sequence[Any], batch_size: int | None) -> Iterator[Sequence[Any]]:
    """Arrival-order micro-batches of `batch_size` records (None: the whole input as one batch)."""
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size}")
    if not records:
        return
    size = len(records) if batch_size is None else batch_size
    for start in range(0, len(records), size):
        yield records[start:start + size]


def key_of(item: Item) -> KeyId:
    """The identity of an item's key (`joins.core.keys`: 1 and 1.0 are two keys)."""
    return key_id(item.get("key"))


def compact_table_items(items: list[Item]) -> list[Item]:
    """Last item per key, ordered by the position of that last item; `old_value` from the first.

    An item marked `is_latest: false` (an out-of-order record of a versioned table, forwarded
    only as history) never hides the batch's latest value of its key: the kept item is the last
    one not so marked, or the last one if every item of the key is out of order.
    Items that are not table results (quarantine reports, watermarks) pass through unchanged.
    """
    first_old: dict[KeyId, Any] = {}
    keep_pos: dict[KeyId, int] = {}
    has_latest: set[KeyId] = set()
    for pos, item in enumerate(items):
        if "key" not in item:
            continue
        k = key_of(item)
        if k not in keep_pos and "old_value" in item:
            first_old[k] = item["old_value"]
        if item.get("is_latest", True) is not False:
            has_latest.add(k)
            keep_pos[k] = pos
        elif k not in has_latest:
            keep_pos[k] = pos
    out: list[Item] = []
    for pos, item in enumerate(items):
        if "key" not in item:
            out.append(item)
            continue
        k = key_of(item)
        if keep_pos[k] != pos:
            continue
        if k in first_old:
            item = {**item, "old_value": first_old[k]}
        out.append(item)
    return out


def run_reference(definition: OperatorDefinition, spec: Any, records: Sequence[Any],
                  batch_size: int | None = 1, metrics: dict[str, int] | None = None) -> list[Item]:
    """Run the reference processor over `records` cut into micro-batches.

    If `metrics` is given it receives the processor's counters (records not joined or emitted:
    late, expired, out of order, ...) so that a caller can report them.
    """
    return run_batches(definition, spec, list(cut_batches(records, batch_size)), metrics)


def run_batches(definition: OperatorDefinition, spec: Any, batches: Sequence[Sequence[Any]],
                metrics: dict[str, int] | None = None) -> list[Item]:
    """`run_reference` over explicit (possibly uneven) micro-batches."""
    processor = definition.reference(spec)
    aware = processor if isinstance(processor, BatchAware) else None
    emitted: list[Item] = []
    for batch in batches:
        ordered = sorted(batch, key=definition.batch_phase)  # stable: arrival order within a phase
        out: list[Item] = []
        if aware is not None:
            aware.begin_batch()
        for record in ordered:
            out.extend(processor.process(record))
        if aware is not None:
            aware.end_batch()
        if definition.compacts_output:
            out = compact_table_items(out)
        last = batch[-1].i
        emitted.extend({**item, "after_input": last} for item in out)
    if metrics is not None:
        metrics.update(getattr(processor, "metrics", {}) or {})
    return emitted
