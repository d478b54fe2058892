"""State stores behind the table-side operators (seeds 000 and 002, KIP-889/914).

`VersionedStore` keeps event-time history per key under one store-wide stream time; history
retention doubles as the store's grace period. `KeyValueStore` is the unversioned store:
latest by arrival (offset), timestamps carried but not used to order.

Both implement the small `TableStore` protocol so that join processors do not care which one
they hold; the processors decide what "out of order" means from `is_versioned`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Literal, Protocol

# A tombstone is a JSON null value. An empty string is a value, never a tombstone.
TOMBSTONE = None


@dataclass(frozen=True)
class VersionedRecord:
    """A value valid in [valid_from, valid_to); valid_to None means still valid."""

    value: Any
    valid_from: int
    valid_to: int | None


@dataclass(frozen=True)
class PutResult:
    """What a put did: stored as the latest version, stored as history (with its valid_to),
    or not stored because it is older than stream time minus history retention."""

    outcome: Literal["latest", "history", "expired"]
    valid_to: int | None = None

    def as_item(self) -> Any:
        if self.outcome == "history":
            return {"valid_to": self.valid_to}
        return self.outcome


class TableStore(Protocol):
    is_versioned: bool

    def put(self, key: Any, value: Any, ts: int) -> PutResult: ...

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None: ...

    def latest_ts(self, key: Any) -> int | None: ...


def _hashable(key: Any) -> Any:
    # Keys may be JSON objects (dicts/lists); freeze them so they can index a dict. Booleans are
    # tagged because Python equates True with 1 (and False with 0), while JSON keys do not.
    if isinstance(key, bool):
        return ("__bool__", key)
    if isinstance(key, dict):
        return ("__obj__", tuple(sorted((k, _hashable(v)) for k, v in key.items())))
    if isinstance(key, list):
        return ("__list__", tuple(_hashable(v) for v in key))
    return key


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
      latest version never expires (returned when its ts <= as_of).
    """

    is_versioned = True

    def __init__(self, history_retention_ms: int) -> None:
        if history_retention_ms < 0:
            raise ValueError("history_retention_ms must be >= 0")
        self.history_retention_ms = history_retention_ms
        self.stream_time: int | None = None
        # key -> (sorted valid_from list, values aligned with it)
        self._versions: dict[Any, tuple[list[int], list[Any]]] = {}

    @property
    def expiry_bound(self) -> int | None:
        """Oldest ts still accepted by a put, and oldest as_of still answered from history."""
        if self.stream_time is None:
            return None
        return self.stream_time - self.history_retention_ms

    def put(self, key: Any, value: Any, ts: int) -> PutResult:
        bound = self.expiry_bound
        if bound is not None and ts < bound:
            return PutResult("expired")
        self.stream_time = ts if self.stream_time is None else max(self.stream_time, ts)
        times, values = self._versions.setdefault(_hashable(key), ([], []))
        pos = bisect.bisect_left(times, ts)
        if pos < len(times) and times[pos] == ts:
            values[pos] = value
        else:
            times.insert(pos, ts)
            values.insert(pos, value)
        self._cleanup(_hashable(key))
        times, values = self._versions[_hashable(key)]
        pos = bisect.bisect_left(times, ts)
        if pos == len(times) - 1:
            return PutResult("latest")
        return PutResult("history", valid_to=times[pos + 1])

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        entry = self._versions.get(_hashable(key))
        if not entry:
            return None
        times, values = entry
        if as_of is None:
            return None if values[-1] is TOMBSTONE else VersionedRecord(values[-1], times[-1], None)
        bound = self.expiry_bound
        if bound is not None and as_of < bound:
            # Beyond history retention only the latest version answers; it never expires.
            if times[-1] <= as_of and values[-1] is not TOMBSTONE:
                return VersionedRecord(values[-1], times[-1], None)
            return None
        pos = bisect.bisect_right(times, as_of) - 1
        if pos < 0 or values[pos] is TOMBSTONE:
            return None
        valid_to = times[pos + 1] if pos + 1 < len(times) else None
        return VersionedRecord(values[pos], times[pos], valid_to)

    def latest_ts(self, key: Any) -> int | None:
        entry = self._versions.get(_hashable(key))
        return entry[0][-1] if entry else None

    def _cleanup(self, hkey: Any) -> None:
        # A history version whose validity ended at or before the expiry bound can never be read
        # again (older as_of values read only the latest version), so its space is reclaimed.
        bound = self.expiry_bound
        times, values = self._versions[hkey]
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
        self._data: dict[Any, tuple[Any, int]] = {}

    def put(self, key: Any, value: Any, ts: int) -> PutResult:
        hkey = _hashable(key)
        if value is TOMBSTONE:
            self._data.pop(hkey, None)
        else:
            self._data[hkey] = (value, ts)
        return PutResult("latest")

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        # Unversioned: as_of is ignored, the lookup is by arrival (seed 000: plain get(key)).
        entry = self._data.get(_hashable(key))
        return None if entry is None else VersionedRecord(entry[0], entry[1], None)

    def latest_ts(self, key: Any) -> int | None:
        entry = self._data.get(_hashable(key))
        return None if entry is None else entry[1]


def make_store(versioned: bool, history_retention_ms: int) -> TableStore:
    return VersionedStore(history_retention_ms) if versioned else KeyValueStore()
