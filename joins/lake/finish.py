"""What a write's app transaction tells after the fact: whether it is in a snapshot, and what
the commit that recorded it added (for a writer whose idempotent write was skipped because it
had landed before a crash)."""

from __future__ import annotations

import os

from joins.lake.location import TableLocation
from joins.lake.log import commit_info, records_txn
from joins.lake.model import AppTxn, CommitInfo
from joins.lake.table import Snapshot, open_snapshot


def already_committed(snap: Snapshot, app_txn: AppTxn) -> bool:
    done = snap.txn_version(app_txn.app_id)
    return done is not None and done >= app_txn.version


def app_txn_committed(loc: TableLocation, app_txn: AppTxn) -> bool:
    """`already_committed` on the table as it is now (False when there is none)."""
    snap = open_snapshot(loc, missing_ok=True)
    return snap is not None and already_committed(snap, app_txn)


def committed_write(path: str | os.PathLike[str], app_txn: AppTxn) -> CommitInfo | None:
    """What the commit of `app_txn` added (version, files, rows, partitions); None when no
    commit records it. Searched from the newest version back: the commit a crashed run left is
    among the last ones. (Commits of this project's earlier delta-rs writer record their app
    transaction the same way.)"""
    loc = TableLocation.of(path)
    snap = open_snapshot(loc, missing_ok=True)
    if snap is None:
        return None
    version = next((v for v in range(snap.version, -1, -1) if records_txn(loc, v, app_txn)), None)
    return None if version is None else commit_info(loc, version, skipped=True)
