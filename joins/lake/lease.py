"""A writer lease: one writer of a join (or of an ingest source) at a time, on any store Delta
tables live on.

The lease is a Delta table of empty commits; each commit's `commitInfo` carries one lease record
(owner, purpose, acquired, expires, released). The only primitive is the one every Delta writer
relies on: version v+1 of a log can be written once (put-if-absent). Acquiring means reading the
latest version v, finding its record free (released or expired) and committing v+1 with
retries disabled: of two contenders exactly one wins, the other re-reads and sees the winner.
Renewal and release are commits of the same kind, so a holder whose lease expired and was
taken over learns it at its next renewal or `check()`.

A lease whose holder is provably gone is taken over at once instead of after its ttl (a writer
killed with -9 would otherwise block the next run for minutes): each record names the process
that wrote it (host, boot, PID namespace, pid and the process's start time), and a contender in
the same PID namespace of the same boot of the same host sees whether that process still runs.
Anywhere else nothing is provable and the ttl decides. The takeover is logged (and passed to
`on_takeover`).

A lease alone cannot stop a paused holder from committing after it expired (no lock can); the
callers add what makes that harmless: a micro-batch's commits are idempotent and deterministic
(app transactions, pinned inputs), and a backfill's partition replace is a commit guarded by
the output table's version (`write_delta(expected_version=...)`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from deltalake import CommitProperties, DeltaTable, Field, Schema
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import create_table_with_add_actions

from joins.lake.errors import LakeError
from joins.lake.location import TableLocation
from joins.lake.process import process_gone, this_process

log = logging.getLogger(__name__)

LEASE_KEY = "temporalJoins.lease"
# How far two writers' clocks may disagree: a lease closer than this to its expiry is read
# before a commit instead of trusted.
CLOCK_MARGIN_MS = 10_000
# A lease log holds no data; a one-column schema is what Delta needs to be a table.
_SCHEMA = Schema([Field("lease", "string")])
# Lease commits are many and tiny: keep their log short.
_CONFIGURATION = {"delta.logRetentionDuration": "interval 1 days", "delta.checkpointInterval": "50"}


class WriterBusyError(LakeError):
    """Another writer holds the lease (after waiting as long as asked)."""

    def __init__(self, message: str, holder: LeaseRecord) -> None:
        self.holder = holder
        super().__init__(message)


class LeaseLostError(LakeError):
    """This writer's lease expired and another writer took it over: stop before committing."""


@dataclass(frozen=True)
class LeaseRecord:
    owner: str
    purpose: str
    acquired_ms: int
    expires_ms: int
    released: bool = False
    # The writing process: "host|boot id|pid namespace|pid|start time" (None: not known).
    process: str | None = None

    def held_at(self, now_ms: int) -> bool:
        return not self.released and self.expires_ms > now_ms

    def holder_gone(self) -> str | None:
        """Why this record's process provably no longer runs (None: it may still run)."""
        return None if self.process is None else process_gone(self.process)

    def describe(self, now_ms: int | None = None) -> str:
        now_ms = _now_ms() if now_ms is None else now_ms
        age = (now_ms - self.acquired_ms) / 1000
        left = (self.expires_ms - now_ms) / 1000
        return (f"{self.purpose} by {self.owner}, running for {age:.1f} s (lease expires in "
                f"{left:.0f} s unless renewed)")


def _now_ms() -> int:
    return int(time.time() * 1000)


def new_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """The lease at `path` (a Delta table created on first use), held as `owner`."""

    def __init__(self, path: str, *, purpose: str, ttl_s: float = 300.0,
                 owner: str | None = None,
                 on_takeover: Callable[[LeaseRecord, str], None] | None = None) -> None:
        if ttl_s <= 0:
            raise LakeError(f"lease ttl must be > 0 s, got {ttl_s}")
        self.loc = TableLocation.of(path)
        self.purpose = purpose
        self.ttl_ms = int(ttl_s * 1000)
        self.owner = owner or new_owner_id()
        self.on_takeover = on_takeover
        self._held = False
        self._lost: str | None = None
        # Expiry of the last record this writer committed: until then (less a margin for
        # clocks that disagree) no other writer may take the lease, so `check` needs no read.
        self._expires_ms: int | None = None

    # -- reading ------------------------------------------------------------------------------

    def current(self) -> tuple[int | None, LeaseRecord | None]:
        """(latest log version, its lease record); (None, None) before the first lease."""
        _, version, record = self._read()
        return version, record

    def _read(self) -> tuple[DeltaTable | None, int | None, LeaseRecord | None]:
        """current(), and the open log at that version (what a commit after it builds on)."""
        try:
            table = DeltaTable(self.loc.delta_uri)
        except TableNotFoundError:
            return None, None, None
        except DeltaError as exc:
            raise LakeError(f"{self.loc}: cannot read the writer lease: {exc}") from exc
        version = table.version()
        info = table.history(1)
        raw = info[0].get(LEASE_KEY) if info else None
        if raw is None:
            return table, version, None
        fields = json.loads(raw)
        known = {k: v for k, v in fields.items() if k in LeaseRecord.__dataclass_fields__}
        return table, version, LeaseRecord(**known)

    # -- writing ------------------------------------------------------------------------------

    def _record(self, *, acquired_ms: int, released: bool = False) -> LeaseRecord:
        return LeaseRecord(owner=self.owner, purpose=self.purpose, acquired_ms=acquired_ms,
                           expires_ms=_now_ms() + self.ttl_ms, released=released,
                           # At each commit, not once: a renewal from a forked child names it.
                           process=this_process())

    def _commit(self, after: int | None, record: LeaseRecord, table: DeltaTable | None = None) -> bool:
        """Commit `record` as version after+1 (0 when None; `table`: the log open at `after`);
        False if another commit won."""
        props = CommitProperties(custom_metadata={LEASE_KEY: json.dumps(asdict(record))},
                                 max_commit_retries=0)
        try:
            if after is None:
                create_table_with_add_actions(self.loc.delta_uri, _SCHEMA, [], mode="error",
                                              configuration=_CONFIGURATION, commit_properties=props)
            else:
                if table is None or table.version() != after:
                    table = DeltaTable(self.loc.delta_uri, version=after)
                table.create_write_transaction([], "append", _SCHEMA, commit_properties=props)
        except CommitFailedError:
            return False
        except DeltaError as exc:
            if after is None and "exists" in str(exc).lower():
                return False
            raise LakeError(f"{self.loc}: cannot write the writer lease: {exc}") from exc
        self._expires_ms = None if record.released else record.expires_ms
        return True

    def try_acquire(self) -> LeaseRecord | None:
        """Take the lease if it is free; else the holder's record (one attempt per free
        version: a lost race is followed by a re-read)."""
        while True:
            table, version, record = self._read()
            now = _now_ms()
            gone = None
            if record is not None and record.held_at(now) and record.owner != self.owner:
                gone = record.holder_gone()
                if gone is None:
                    return record
            acquired = record.acquired_ms if record is not None and record.owner == self.owner \
                and record.held_at(now) else now
            if self._commit(version, self._record(acquired_ms=acquired), table):
                self._held, self._lost = True, None
                if gone is not None and record is not None:
                    self._took_over(record, gone)
                return None

    def _took_over(self, record: LeaseRecord, why: str) -> None:
        message = (f"{self.loc}: took over the lease of {record.purpose} by {record.owner} "
                   f"{(record.expires_ms - _now_ms()) / 1000:.0f} s before it expires: {why}")
        log.warning(message)
        if self.on_takeover is not None:
            self.on_takeover(record, message)

    def acquire(self, *, wait_s: float = 0.0, poll_s: float = 0.2,
                on_wait: Callable[[LeaseRecord], None] | None = None) -> None:
        """Take the lease, waiting up to `wait_s` for the holder; WriterBusyError after that."""
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            holder = self.try_acquire()
            if holder is None:
                return
            if time.monotonic() >= deadline:
                raise WriterBusyError(
                    f"{self.loc}: another writer is running: {holder.describe(_now_ms())}; "
                    f"waited {wait_s:.0f} s", holder)
            if on_wait is not None and not told:
                on_wait(holder)
                told = True
            time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())) or poll_s)

    def check(self) -> None:
        """Raise LeaseLostError unless this writer still holds the lease (call before commits).

        Another writer takes a lease only once it is released or expired (`try_acquire`), so
        while this writer's own unreleased record is well inside its expiry the answer is known
        without reading the log (a read per commit is a micro-batch's latency)."""
        if self._lost is not None:
            raise LeaseLostError(self._lost)
        margin = min(self.ttl_ms // 4, CLOCK_MARGIN_MS)
        if self._held and self._expires_ms is not None and _now_ms() < self._expires_ms - margin:
            return
        _, record = self.current()
        if record is None or record.owner != self.owner or not record.held_at(_now_ms()):
            holder = "nobody" if record is None else record.describe(_now_ms())
            self._lost = (f"{self.loc}: this writer ({self.owner}, {self.purpose}) no longer holds "
                          f"the lease (now: {holder}); nothing more is committed")
            raise LeaseLostError(self._lost)

    def renew(self) -> None:
        version, record = self.current()
        if record is None or record.owner != self.owner or record.released:
            self.check()
            return
        if not self._commit(version, self._record(acquired_ms=record.acquired_ms)):
            self.check()  # someone else committed: still ours only if their commit says so

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        for _ in range(5):
            table, version, record = self._read()
            if record is None or record.owner != self.owner or record.released:
                return  # taken over meanwhile: nothing of ours to release
            if self._commit(version, LeaseRecord(self.owner, self.purpose, record.acquired_ms,
                                                 _now_ms(), released=True, process=this_process()),
                            table):
                return

    @contextmanager
    def held(self, *, wait_s: float = 0.0,
             on_wait: Callable[[LeaseRecord], None] | None = None) -> Iterator[Lease]:
        """Hold the lease for the block, renewing it in the background every ttl/3."""
        self.acquire(wait_s=wait_s, on_wait=on_wait)
        stop = threading.Event()

        def renew_until_stopped() -> None:
            while not stop.wait(self.ttl_ms / 3000):
                try:
                    self.renew()
                except LeaseLostError as exc:
                    self._lost = str(exc)
                    return
                except LakeError:
                    continue  # a transient store error: the next renewal tries again

        renewer = threading.Thread(target=renew_until_stopped, name="tj-lease-renewal", daemon=True)
        renewer.start()
        try:
            yield self
        finally:
            stop.set()
            renewer.join()
            self.release()
