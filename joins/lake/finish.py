"""The last step of a write: one commit of the placed files, and what to do when it fails.

A commit either lands or leaves no trace: a failed commit removes this write's files, unless
the log cannot tell whether it landed (then they stay for `vacuum_orphans`). A lost race to
create a table is retried as a commit into the winner's table; an idempotent write whose app
transaction a concurrent writer committed first is skipped.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence

from joins.lake import commit as _commit
from joins.lake.errors import ConcurrentCommitError, LakeError
from joins.lake.location import TableLocation
from joins.lake.log import commit_info, records_txn
from joins.lake.model import AppTxn, CommitInfo, Partitions, partitions_of
from joins.lake.schema import SchemaMode, plan_write
from joins.lake.table import Snapshot, open_snapshot

log = logging.getLogger(__name__)


def already_committed(snap: Snapshot, app_txn: AppTxn) -> bool:
    done = snap.txn_version(app_txn.app_id)
    return done is not None and done >= app_txn.version


def commit_or_clean(request: _commit.CommitRequest, *, schema_mode: SchemaMode) -> CommitInfo:
    loc, files = request.loc, request.files
    read_version = request.snapshot.version if request.snapshot is not None else None
    rows = sum(f.num_records for f in files)
    app_txn = request.app_txn
    if app_txn is not None and request.snapshot is not None:
        # The Spark job may have run for minutes; a concurrent replay may have won meanwhile.
        fresh = open_snapshot(loc, missing_ok=True)
        if fresh is not None and already_committed(fresh, app_txn):
            remove_quietly(loc, [f.path for f in files], None)
            return CommitInfo(version=None, skipped=True, files=0, rows=0)
    try:
        _commit.commit_files(request)
    except Exception as exc:
        try:
            landed = _commit.find_commit(loc, request.write_id, read_version)
        except LakeError:
            raise LakeError(f"{loc}: commit failed ({exc}) and the log cannot tell whether it "
                            "landed; its files stay for vacuum_orphans") from exc
        if landed is None:
            if app_txn is not None and _already_committed_at(loc, app_txn):
                remove_quietly(loc, [f.path for f in files], None)
                return CommitInfo(version=None, skipped=True, files=0, rows=0)
            if request.snapshot is None and not request.guarded:
                # Lost the race to create the table: commit the same files into the winner's
                # table, under its schema rules, as a writer that found the table would.
                retried = _retry_on_created(request, schema_mode)
                if retried is not None:
                    return retried
            remove_quietly(loc, [f.path for f in files], None)
            if request.guarded:
                raise ConcurrentCommitError(
                    f"{loc}: another writer committed to the table meanwhile; nothing was "
                    f"committed ({exc})") from exc
            raise LakeError(f"{loc}: commit failed, nothing was written: {exc}") from exc
        return CommitInfo(version=landed, skipped=False, files=len(files), rows=rows,
                          partitions=_partitions(files))
    version = _commit.find_commit(loc, request.write_id, read_version)
    return CommitInfo(version=version, skipped=False, files=len(files), rows=rows,
                      partitions=_partitions(files))


def _partitions(files: Sequence[_commit.StagedFile]) -> Partitions:
    return partitions_of(f.partition_values for f in files)


def committed_write(path: str | os.PathLike[str], app_txn: AppTxn) -> CommitInfo | None:
    """What the commit of `app_txn` added (version, files, rows, partitions), found by the tag
    `write_delta` puts in its commitInfo; None when no commit carries it. For a writer whose
    idempotent write was skipped because it had landed before a crash."""
    loc = TableLocation.of(path)
    version = _commit.find_commit(loc, _commit.app_txn_tag(app_txn), None, key=_commit.APP_TXN_KEY)
    if version is None:
        version = _commit_with_txn(loc, app_txn)   # a delta-spark commit carries no tag
    return None if version is None else commit_info(loc, version, skipped=True)


def _commit_with_txn(loc: TableLocation, app_txn: AppTxn) -> int | None:
    """The version whose commit records `app_txn`, searched from the newest back (the commit a
    crashed run left is among the last ones)."""
    snap = open_snapshot(loc, missing_ok=True)
    if snap is None:
        return None
    return next((v for v in range(snap.version, -1, -1) if records_txn(loc, v, app_txn)), None)


def _retry_on_created(request: _commit.CommitRequest, schema_mode: SchemaMode) -> CommitInfo | None:
    fresh = open_snapshot(request.loc, missing_ok=True)
    if fresh is None:
        return None
    try:
        fresh.check_writable(overwrite=request.mode == "overwrite")
        plan = plan_write(request.schema, fresh.schema, fresh.partition_by,
                          partition_by=request.partition_by, schema_mode=schema_mode,
                          table=str(request.loc))
    except LakeError:
        remove_quietly(request.loc, [f.path for f in request.files], None)
        raise
    if plan.partition_by != request.partition_by:
        return None
    retry = dataclasses.replace(request, snapshot=fresh, schema=plan.schema,
                                new_columns=plan.new_columns)
    return commit_or_clean(retry, schema_mode=schema_mode)


def _already_committed_at(loc: TableLocation, app_txn: AppTxn) -> bool:
    snap = open_snapshot(loc, missing_ok=True)
    return snap is not None and already_committed(snap, app_txn)


def remove_quietly(loc: TableLocation, paths: list[str], staging: str | None) -> None:
    """Best-effort cleanup of this write's own files; what stays is vacuum_orphans' job."""
    for rel in paths:
        try:
            loc.fs.delete_file(loc.fs_path(rel))
        except OSError as exc:
            log.warning("%s: could not remove uncommitted file %s: %s", loc, rel, exc)
    if staging is not None:
        try:
            loc.fs.delete_dir(loc.fs_path(staging))
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("%s: could not remove staging directory %s: %s", loc, staging, exc)
