"""Opened delta-rs tables kept per (table, version), and a local table's latest version read
from its log's file names.

Opening a table replays its log: 15–50 ms for a table of a few dozen commits, about what a
micro-batch's Spark job on a few rows costs. A micro-batch asked delta-rs for 17 opens of 7
tables (the sources' versions, their schemas, the changes and statistics of the same pinned
versions, the state tables' versions and reads, each write's look at its target). One version
of a table never changes, so an open one serves every later reader of that version:

- **Which version is latest** (local tables): the highest `NNNNNNNNNNNNNNNNNNNN.json` in
  `_delta_log`, as delta-rs finds it, without opening anything. A commit file is complete when
  its name appears (delta-rs and delta-spark both write it under another name and then link or
  rename it into place).
- **Same version, same table**: a kept table serves a version only while that version's commit
  file is the one seen when it was opened (inode, size, modification time): a table deleted and
  created anew at the same path has new commit files, and a kept open of the old one is dropped.
- **Read only**: the kept tables are shared by every caller, so nothing may move one to another
  version or commit through it (`open_snapshot(..., shared=False)` gives a table of one's own).

Remote tables (`s3://...`) are opened every time: a listing there costs what an open does.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from joins.lake.location import DELTA_LOG, TableLocation
from joins.lake.log import COMMIT_FILE, commit_path

if TYPE_CHECKING:
    from deltalake import DeltaTable

# A micro-batch reads up to about ten (table, version) pairs; a long-lived process (a run
# worker) keeps no more than this many tables' file lists in memory.
KEPT = 24

Stamp = tuple[int, int, int]


def latest_local_version(loc: TableLocation) -> int | None:
    """The highest committed version of a local table; None when it has no commit (or no
    log). Remote tables are not listed here (None, and `is_local` is False)."""
    try:
        names = os.listdir(os.path.join(loc.uri, DELTA_LOG))
    except (FileNotFoundError, NotADirectoryError):
        return None
    best = -1
    for name in names:
        match = COMMIT_FILE.match(name)
        if match is not None:
            best = max(best, int(match.group(1)))
    return best if best >= 0 else None


def _stamp(loc: TableLocation, version: int) -> Stamp | None:
    try:
        st = os.stat(os.path.join(loc.uri, commit_path(version)))
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class KeptTables:
    """Open tables by (location, version), least recently used dropped first."""

    def __init__(self, size: int = KEPT) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._tables: OrderedDict[tuple[str, int], tuple[DeltaTable, Stamp]] = OrderedDict()

    def get(self, loc: TableLocation, version: int) -> DeltaTable | None:
        stamp = _stamp(loc, version)
        key = (loc.uri, version)
        with self._lock:
            kept = self._tables.get(key)
            if kept is None:
                return None
            if stamp is None or kept[1] != stamp:
                del self._tables[key]
                return None
            self._tables.move_to_end(key)
            return kept[0]

    def put(self, loc: TableLocation, table: DeltaTable) -> None:
        version = table.version()
        stamp = _stamp(loc, version)
        if stamp is None:
            return  # the commit file is gone (log cleanup) or renamed: nothing to check against
        with self._lock:
            self._tables[(loc.uri, version)] = (table, stamp)
            self._tables.move_to_end((loc.uri, version))
            while len(self._tables) > self._size:
                self._tables.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()


KEPT_TABLES = KeptTables()
