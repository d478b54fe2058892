"""State stores behind the table-side operators (seeds 000 and 002, KIP-889/914).

`VersionedStore` keeps event-time history per key under one store-wide stream time; history
retention doubles as the store's grace period. `KeyValueStore` is the unversioned store:
latest by arrival (offset), timestamps carried but not used to order. Keys are indexed by
`joins.core.keys.key_id` (1 and 1.0 are two keys).

Both implement `TableStore`, and a put answers, once, everything a processor needs to know about
the record it stored (`PutResult`): whether it is the key's new `latest` value, `out_of_order`
(a versioned store filed it as history: it is older than the key's latest ts) or `expired`
(older than stream time minus history retention: not stored), and the key's value before the
put. Processors decide on that answer and never compare timestamps themselves.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from joins.core.keys import KeyId, key_id

# A tombstone is a JSON null value. An empty string is a value, never a tombstone.
TOMBSTONE = None

PutOutcome = Literal["latest", "out_of_order", "expired"]


@dataclass(frozen=True)
class VersionedRecord:
    """A value valid in [valid_from, valid_to); valid_to None means still valid."""

    value: Any
    valid_from: int
    valid_to: int | None


@dataclass(frozen=True)
class PutResult:
    """What a put did.

    - `outcome`: `latest` (the key's current value now; an equal ts replaces and counts as
      latest), `out_of_order` (stored as history, valid until `valid_to`) or `expired` (not
      stored: older than stream time minus history retention). An unversioned store's puts are
      always `latest`.
    - `previous`: the key's current value before the put (latest by ts in a versioned store, by
      arrival in an unversioned one), None when absent or deleted. A put that is not `latest`
      leaves it current.
    """

    outcome: PutOutcome
    previous: VersionedRecord | None = None
    valid_to: int | None = None

    @property
    def is_latest(self) -> bool:
        return self.outcome == "latest"

    def as_item(self) -> Any:
        """The scenario format's put item: "latest", {"valid_to": T} or "expired"."""
        if self.outcome == "out_of_order":
            return {"valid_to": self.valid_to}
        return self.outcome


class TableStore(Protocol):
    is_versioned: bool

    def put(self, key: Any, value: Any, ts: int) -> PutResult: ...

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None: ...


class VersionedStore:
    """A versioned key-value store with store-wide stream time and history retention.

    Rules (issue 2 §1, seeds 000/002):
    - stream time is the largest ts ever put, for any key;
    - a put with ts < stream_time - history_retention is not stored ("expired"); ts equal to that
      bound is stored;
    - a put with the same ts as an existing version replaces it (value <-> tombstone too) and an
      equal ts counts as latest, not out of order;
    - get(key, as_of) returns the version with the largest valid_from <= as_of; a tombstone
      version reads as null; as_of < stream_time - history_retention reads null, except that the
      latest version never expires (returned when its ts <= as_of);
    - while reads are pinned (`pin_reads`, a micro-batch's lookups: `joins.microbatch`), a get
      judges history retention against the stream time at the pin, not the live one; puts still
      expire by the live stream time.
    """

    is_versioned = True

    def __init__(self, history_retention_ms: int) -> None:
        if history_retention_ms < 0:
            raise ValueError("history_retention_ms must be >= 0")
        self.history_retention_ms = history_retention_ms
        self.stream_time: int | None = None
        self._pinned = False
        self._read_time: int | None = None
        # key id -> (sorted valid_from list, values aligned with it)
        self._versions: dict[KeyId, tuple[list[int], list[Any]]] = {}

    @property
    def expiry_bound(self) -> int | None:
        """Oldest ts still accepted by a put, and oldest as_of still answered from history."""
        if self.stream_time is None:
            return None
        return self.stream_time - self.history_retention_ms

    @property
    def read_bound(self) -> int | None:
        """Oldest as_of a get answers from history: the expiry bound, or while reads are pinned,
        the one at the pin."""
        if not self._pinned:
            return self.expiry_bound
        return None if self._read_time is None else self._read_time - self.history_retention_ms

    def is_beyond_retention(self, ts: int) -> bool:
        """Is `ts` older than stream time minus history retention (a put there expires)?"""
        bound = self.expiry_bound
        return bound is not None and ts < bound

    def is_read_beyond_retention(self, as_of: int) -> bool:
        """Is a get at `as_of` answered by the latest version only (`read_bound`)?"""
        bound = self.read_bound
        return bound is not None and as_of < bound

    def pin_reads(self) -> None:
        """Judge gets' history retention against the stream time as it is now, until
        `unpin_reads`, and keep the history such gets can read meanwhile. A micro-batch applies
        its table updates before its stream records; in event-time order the table would not
        have run ahead of them, so their lookups keep the retention clock of the batch's start."""
        self._pinned, self._read_time = True, self.stream_time

    def unpin_reads(self) -> None:
        self._pinned, self._read_time = False, None

    def put(self, key: Any, value: Any, ts: int) -> PutResult:
        previous = self.get(key)
        if self.is_beyond_retention(ts):
            return PutResult("expired", previous)
        self.stream_time = ts if self.stream_time is None else max(self.stream_time, ts)
        kid = key_id(key)
        times, values = self._versions.setdefault(kid, ([], []))
        pos = bisect.bisect_left(times, ts)
        if pos < len(times) and times[pos] == ts:
            values[pos] = value
        else:
            times.insert(pos, ts)
            values.insert(pos, value)
        self._cleanup(kid)
        times, values = self._versions[kid]
        pos = bisect.bisect_left(times, ts)
        if pos == len(times) - 1:
            return PutResult("latest", previous)
        return PutResult("out_of_order", previous, valid_to=times[pos + 1])

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        entry = self._versions.get(key_id(key))
        if not entry:
            return None
        times, values = entry
        if as_of is None:
            return None if values[-1] is TOMBSTONE else VersionedRecord(values[-1], times[-1], None)
        if self.is_read_beyond_retention(as_of):
            # Beyond history retention only the latest version answers; it never expires.
            if times[-1] <= as_of and values[-1] is not TOMBSTONE:
                return VersionedRecord(values[-1], times[-1], None)
            return None
        pos = bisect.bisect_right(times, as_of) - 1
        if pos < 0 or values[pos] is TOMBSTONE:
            return None
        valid_to = times[pos + 1] if pos + 1 < len(times) else None
        return VersionedRecord(values[pos], times[pos], valid_to)

    def _cleanup(self, kid: KeyId) -> None:
        # A history version whose validity ended at or before the expiry bound can never be read
        # again (older as_of values read only the latest version), so its space is reclaimed.
        bound = self.read_bound
        times, values = self._versions[kid]
        if bound is None:
            return
        drop = 0
        while drop < len(times) - 1 and times[drop + 1] <= bound:
            drop += 1
        if drop:
            del times[:drop]
            del values[:drop]


class KeyValueStore:
    """The unversioned store: latest by arrival order, whatever the timestamps say."""

    is_versioned = False

    def __init__(self) -> None:
        self._data: dict[KeyId, tuple[Any, int]] = {}

    def put(self, key: Any, value: Any, ts: int) -> PutResult:
        previous = self.get(key)
        kid = key_id(key)
        if value is TOMBSTONE:
            self._data.pop(kid, None)
        else:
            self._data[kid] = (value, ts)
        return PutResult("latest", previous)

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        # Unversioned: as_of is ignored, the lookup is by arrival (seed 000: plain get(key)).
        entry = self._data.get(key_id(key))
        return None if entry is None else VersionedRecord(entry[0], entry[1], None)


def make_store(versioned: bool, history_retention_ms: int) -> TableStore:
    return VersionedStore(history_retention_ms) if versioned else KeyValueStore()
