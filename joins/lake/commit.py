"""One Delta commit of files that are already in the table directory, through delta-rs's
write-transaction API: a new table with its first files, an append, a full overwrite or an
overwrite of the partitions matching a filter. The app transaction rides in the same commit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from deltalake import CommitProperties, DeltaTable, Field, Schema, Transaction
from deltalake.exceptions import DeltaError
from deltalake.transaction import AddAction, create_table_with_add_actions
from pyspark.sql import types as T

from joins.lake.errors import LakeError
from joins.lake.location import TableLocation
from joins.lake.model import AppTxn
from joins.lake.table import Snapshot, open_snapshot

# Marks our commit in commitInfo so that we can find its version afterwards (delta-rs returns
# none) and tell, after an error, whether it landed anyway.
WRITE_ID_KEY = "temporalJoins.writeId"
# The app transaction of a commit, `<app id>@<version>`, so that a writer whose idempotent
# write was skipped (it had landed before a crash) can still learn what that commit added.
APP_TXN_KEY = "temporalJoins.appTxn"


@dataclass(frozen=True)
class StagedFile:
    """A data file in its final place, not yet committed."""

    path: str                                  # decoded, relative to the table root
    size: int
    modification_time: int                     # ms since the epoch
    partition_values: dict[str, str | None]    # Delta partition value strings
    num_records: int
    stats: str


@dataclass(frozen=True)
class CommitRequest:
    loc: TableLocation
    snapshot: Snapshot | None                  # None: the commit creates the table
    schema: T.StructType                       # the table schema after the commit
    partition_by: list[str]
    new_columns: list[T.StructField]
    files: list[StagedFile]
    mode: Literal["append", "overwrite"]
    # (column, "in", [values]) conjunction; None with overwrite replaces the whole table.
    partition_filters: list[tuple[str, str, list[str]]] | None
    app_txn: AppTxn | None
    write_id: str
    commit_message: str | None
    # Land as exactly version snapshot.version + 1 or fail (no retry over a concurrent commit).
    guarded: bool = False
    # Delta table properties of a table this commit creates (ignored for an existing table).
    configuration: dict[str, str] | None = None


def _delta_schema(schema: T.StructType) -> Schema:
    return Schema.from_json(schema.json())


def _properties(req: CommitRequest, *, retries: bool) -> CommitProperties:
    metadata: dict[str, Any] = {WRITE_ID_KEY: req.write_id}
    if req.commit_message is not None:
        metadata["userMetadata"] = req.commit_message
    if req.app_txn is not None:
        metadata[APP_TXN_KEY] = app_txn_tag(req.app_txn)
    txns = [Transaction(req.app_txn.app_id, req.app_txn.version)] if req.app_txn else None
    return CommitProperties(custom_metadata=metadata, app_transactions=txns,
                            max_commit_retries=None if retries else 0)


def app_txn_tag(app_txn: AppTxn) -> str:
    return f"{app_txn.app_id}@{app_txn.version}"


def commit_files(req: CommitRequest) -> None:
    """Commit `req.files` in one transaction. Raises on any failure; the caller decides
    whether the commit landed regardless (see `find_commit`)."""
    adds = [AddAction(f.path, f.size, dict(f.partition_values), f.modification_time, True, f.stats)
            for f in req.files]
    if req.snapshot is None:
        # No retries: delta-rs would otherwise "retry" a lost creation race as version 1 and
        # land both writers' files (seen with two processes).
        create_table_with_add_actions(
            req.loc.delta_uri, _delta_schema(req.schema), adds, mode="error",
            partition_by=req.partition_by or None, configuration=req.configuration or None,
            commit_properties=_properties(req, retries=False))
        return
    table = req.snapshot.table
    if req.new_columns:
        # delta-rs keeps the old schema on a plain write transaction, so merge mode widens the
        # schema in a commit of its own first. Adding nullable columns changes no row, so a
        # crash between the two commits leaves a valid (wider) table.
        new_fields = [Field.from_json(json.dumps(f.jsonValue())) for f in req.new_columns]
        table.alter.add_columns(new_fields)
        table = DeltaTable(req.loc.delta_uri)
    table.create_write_transaction(
        adds, req.mode, _delta_schema(req.schema), partition_by=req.partition_by or None,
        partition_filters=req.partition_filters,
        commit_properties=_properties(req, retries=not req.guarded))


def find_commit(loc: TableLocation, write_id: str, after_version: int | None, *,
                key: str = WRITE_ID_KEY) -> int | None:
    """The version whose commitInfo carries `write_id` (under `key`), searching the commits
    made after `after_version` (None: since the table's creation)."""
    snap = open_snapshot(loc, missing_ok=True)
    if snap is None:
        return None
    latest = snap.version
    count = latest - (after_version if after_version is not None else -1)
    if count <= 0:
        return None
    try:
        commits = snap.table.history(count)
    except DeltaError as exc:
        raise LakeError(f"{loc}: cannot read the history to locate commit {write_id}: {exc}") \
            from exc
    for info in commits:
        if info.get(key) == write_id:
            return int(info["version"])
    return None
