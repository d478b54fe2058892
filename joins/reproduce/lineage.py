"""Which writes an output table holds, read from its Delta log: the commit a micro-batch made
(its app transaction), the commits that wrote an event day up to some commit, and whether a
pinned version can still be read (a vacuum removes the files of old versions; log cleanup,
the log entries)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from joins.errors import JoinsError
from joins.lake import LakeError
from joins.lake.location import TableLocation
from joins.lake.log import commit_actions
from joins.lake.table import open_snapshot


class ReproduceError(JoinsError):
    """A past output that cannot be reproduced: no such batch, day or commit, or an input
    version whose files are gone."""


@dataclass(frozen=True)
class DayWrite:
    """A commit that wrote rows of an event day: a micro-batch's append (`batch`: its id, from
    the commit's app transaction), a backfill's replace (`backfill_message`: its commit message,
    which names the inputs it read), or neither (a write from outside the join)."""

    version: int
    backfill_message: str | None
    batch: int | None = None


def require_version(path: str, version: int, what: str) -> None:
    """`what` at `version` can be read: its log entry and every data file are there."""
    try:
        snap = open_snapshot(path, version=version)
    except LakeError as exc:
        raise ReproduceError(f"{what} version {version} cannot be read any more: {exc}") from None
    assert snap is not None
    loc = TableLocation.of(path)
    files = [loc.fs_path(f.path) for f in snap.files()]
    gone = [info.path for info in loc.fs.get_file_info(files) if info.type.name == "NotFound"]
    if gone:
        raise ReproduceError(f"{what} version {version} cannot be read any more: {len(gone)} of "
                             f"its {len(files)} data file(s) were removed (a vacuum), e.g. "
                             f"{gone[0]}; a reproduction needs the versions it pins")


def latest_commit(path: str, what: str) -> int:
    snap = open_snapshot(path, missing_ok=True)
    if snap is None:
        raise ReproduceError(f"{what}: no output table at {path} (no batch has written yet)")
    return snap.version


def txn_at(path: str, version: int, app_id: str) -> int | None:
    snap = open_snapshot(path, version=version)
    assert snap is not None
    return snap.txn_version(app_id)


def _reached(path: str, version: int, app_id: str, batch_id: int) -> bool:
    txn = txn_at(path, version, app_id)
    return txn is not None and txn >= batch_id


def batch_commit(path: str, app_id: str, batch_id: int) -> int | None:
    """The output version micro-batch `batch_id` committed (None: it wrote no row). The app
    transaction only grows with the version, so a binary search finds it."""
    lo, hi = 0, latest_commit(path, app_id)
    if not _reached(path, hi, app_id, batch_id):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if _reached(path, mid, app_id, batch_id):
            hi = mid
        else:
            lo = mid + 1
    return lo if txn_at(path, lo, app_id) == batch_id else None


def day_writes(path: str, day: dt.date, upto: int, app_id: str) -> list[DayWrite]:
    """The commits up to `upto` that added rows of `day` (event_date partition), oldest first."""
    loc = TableLocation.of(path)
    out: list[DayWrite] = []
    try:
        for version in range(upto + 1):
            actions = commit_actions(loc, version)
            adds = [a["add"] for a in actions if "add" in a]
            if not any((a.get("partitionValues") or {}).get("event_date") == day.isoformat()
                       for a in adds):
                continue
            message = next((a["commitInfo"].get("userMetadata") for a in actions
                            if "commitInfo" in a), None)
            batch = next((a["txn"]["version"] for a in actions
                          if "txn" in a and a["txn"].get("appId") == app_id), None)
            out.append(DayWrite(version, message if message and "backfill of" in message else None,
                                batch))
    except LakeError as exc:
        raise ReproduceError(f"cannot list the writes of {day}: {exc}") from None
    return out
