"""Small tables without Spark: a batch log's rows, a plan, a manifest of file names.

Metadata of a few rows per batch does not need a Spark job (each costs a tenth of a second of
a micro-batch's latency); delta-rs writes and reads it directly. Data never goes this way: a
table's rows are written by Spark tasks (`write.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import CommitProperties, DeltaTable, QueryBuilder, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from pyarrow.parquet import filters_to_expression

from joins.lake.errors import ConcurrentCommitError, LakeError
from joins.lake.location import TableLocation
from joins.lake.model import AppTxn, CommitInfo

# A table written this way holds metadata; more than this many rows is a caller's mistake.
MAX_ROWS = 100_000


def write_arrow(table: pa.Table, path: str, *, mode: str = "append", app_txn: AppTxn | None = None,
                commit_message: str | None = None,
                expected_version: int | None = None, new_schema: bool = False,
                partition_by: list[str] | None = None,
                configuration: Mapping[str, str] | None = None,
                skip_empty: bool = False) -> CommitInfo:
    """Append (or overwrite with) a small Arrow table in one commit, idempotent with `app_txn`;
    with `expected_version`, the commit must be exactly the next version (else
    ConcurrentCommitError and nothing is committed). `new_schema` (with mode overwrite): the
    table's columns become the Arrow table's (a metadata table rewritten in a new format).
    `partition_by` and `configuration` apply when this write creates the table; `skip_empty`:
    no rows for an existing table commit nothing (CommitInfo(version=None, files=0))."""
    loc = TableLocation.of(path)
    if table.num_rows > MAX_ROWS:
        raise LakeError(f"{loc}: {table.num_rows} rows is too many for a metadata write "
                        f"(at most {MAX_ROWS}); write data with Spark")
    existing = _open(loc)
    if skip_empty and existing is not None and table.num_rows == 0:
        return CommitInfo(version=None, skipped=False, files=0, rows=0)
    if expected_version is not None and (existing is None or existing.version() != expected_version):
        raise ConcurrentCommitError(f"{loc}: expected the table at version {expected_version}; "
                                    "another writer committed meanwhile; nothing was committed")
    if existing is not None and app_txn is not None:
        done = existing.transaction_version(app_txn.app_id)
        if done is not None and done >= app_txn.version:
            return CommitInfo(version=None, skipped=True, files=0, rows=0)
    metadata: dict[str, Any] = {}
    if commit_message is not None:
        metadata["userMetadata"] = commit_message
    txns = [Transaction(app_txn.app_id, app_txn.version)] if app_txn is not None else None
    # Through the table already open: delta-rs moves it to the version it commits (a commit
    # that races another append is retried on top of it, unless a version is expected).
    target: str | DeltaTable = loc.delta_uri if existing is None else existing
    try:
        write_deltalake(target, table, mode=mode,  # type: ignore[arg-type]
                        schema_mode="overwrite" if new_schema else None,
                        partition_by=partition_by if existing is None else None,
                        configuration=dict(configuration or {}) if existing is None else None,
                        commit_properties=CommitProperties(
                            custom_metadata=metadata, app_transactions=txns,
                            max_commit_retries=None if expected_version is None else 0))
    except CommitFailedError as exc:
        if expected_version is not None:
            raise ConcurrentCommitError(f"{loc}: another writer committed meanwhile; nothing "
                                        "was committed") from exc
        raise LakeError(f"{loc}: commit failed: {exc}") from exc
    except DeltaError as exc:
        again = _open(loc)
        if again is not None and app_txn is not None:
            done = again.transaction_version(app_txn.app_id)
            if done is not None and done >= app_txn.version:
                return CommitInfo(version=None, skipped=True, files=0, rows=0)
        raise LakeError(f"{loc}: commit failed: {exc}") from exc
    after = existing if existing is not None else _open(loc)
    assert after is not None
    return CommitInfo(version=after.version(), skipped=False, files=1, rows=table.num_rows)


def read_arrow(path: str, *, version: int | None = None,
               filters: Sequence[tuple[str, str, Any]] | None = None) -> pa.Table | None:
    """A small table (optionally filtered, at `version`) as Arrow; None when there is no table."""
    small = open_small(path, version=version)
    return None if small is None else small.read(filters)


class SmallTable:
    """One version of a small table: its rows and its app transactions, read from one open."""

    def __init__(self, loc: TableLocation, table: DeltaTable) -> None:
        self.loc, self.table = loc, table

    def txn_version(self, app_id: str) -> int | None:
        return self.table.transaction_version(app_id)

    def read(self, filters: Sequence[tuple[str, str, Any]] | None = None) -> pa.Table:
        # delta-rs's own pyarrow read goes through a Python file system, which Arrow's I/O
        # threads call into; such a read left threads that aborted the process at exit
        # (`terminate called without an active exception`, exit 134) in most one-read
        # processes, locally and on S3. Arrow's local file system and delta-rs's Rust reader
        # (DataFusion, for a store whose options only delta-rs knows) call no Python.
        try:
            if self.loc.is_local:
                local = pafs.SubTreeFileSystem(self.loc.fs_path(), self.loc.fs)
                return self.table.to_pyarrow_table(filters=list(filters) if filters else None,
                                                   filesystem=local)
            return self.read_in_rust(filters)
        except DeltaError as exc:
            raise LakeError(f"{self.loc}: cannot read: {exc}") from exc

    def read_in_rust(self, filters: Sequence[tuple[str, str, Any]] | None = None) -> pa.Table:
        """The rows as `read` gives them, read by delta-rs alone: DataFusion's string views
        cast back to the table's schema, `filters` applied to the rows (a small table)."""
        schema = pa.schema(self.table.schema().to_arrow())
        query = QueryBuilder().register("t", self.table).execute("SELECT * FROM t")
        rows = pa.table(query).select(schema.names).cast(schema)
        return rows.filter(filters_to_expression(list(filters))) if filters else rows


def open_small(path: str, *, version: int | None = None) -> SmallTable | None:
    """The table at its latest version (or `version`); None when there is no table."""
    loc = TableLocation.of(path)
    table = _open(loc, version=version)
    return None if table is None else SmallTable(loc, table)


def _open(loc: TableLocation, *, version: int | None = None) -> DeltaTable | None:
    try:
        return DeltaTable(loc.delta_uri, version=version)
    except TableNotFoundError:
        return None
    except DeltaError as exc:
        raise LakeError(f"{loc}: cannot open the table: {exc}") from exc
