"""Table snapshots through delta-rs: version, schema, partitioning, protocol and the file list.

This module and `commit.py` are the only ones that import `deltalake`.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError
from pyspark.sql import types as T

from joins.lake.errors import LakeError, UnsupportedTableError
from joins.lake.location import TableLocation
from joins.lake.log import commit_time
from joins.lake.model import FileEntry
from joins.lake.schema import spark_schema_from_delta_json
from joins.lake.snapshots import KEPT_TABLES, latest_local_version

# Reader features whose files Spark's plain Parquet reader reads correctly.
READABLE_FEATURES = frozenset({"timestampNtz", "vacuumProtocolCheck", "v2Checkpoint"})
# Writer features a commit of plain added/removed files honours. The content checks in
# `check_writable` refuse the cases inside these features that need more (a declared
# constraint, a generated column, an invariant).
WRITABLE_FEATURES = frozenset({"appendOnly", "invariants", "timestampNtz", "checkConstraints",
                               "changeDataFeed", "generatedColumns", "vacuumProtocolCheck"})


@dataclass
class Snapshot:
    """One version of a table as seen by delta-rs."""

    loc: TableLocation
    table: DeltaTable

    @property
    def version(self) -> int:
        return self.table.version()

    @property
    def schema(self) -> T.StructType:
        return spark_schema_from_delta_json(self.table.schema().to_json())

    @property
    def partition_by(self) -> list[str]:
        return list(self.table.metadata().partition_columns)

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self.table.metadata().configuration)

    def txn_version(self, app_id: str) -> int | None:
        return self.table.transaction_version(app_id)

    def files(self) -> list[FileEntry]:
        """The data files of this version with typed partition values."""
        actions = pa.table(self.table.get_add_actions(flatten=True))
        parts = self.partition_by
        paths = actions.column("path").to_pylist()
        sizes = actions.column("size_bytes").to_pylist()
        counts = (actions.column("num_records").to_pylist() if "num_records" in actions.column_names
                  else [None] * len(paths))
        values = {p: actions.column(f"partition.{p}").to_pylist() for p in parts}
        out: list[FileEntry] = []
        for i, raw in enumerate(paths):
            rel = self.loc.log_relative_path(raw)
            if rel is None:
                raise UnsupportedTableError(f"{self.loc}: file {raw} lives outside the table root")
            out.append(FileEntry(rel, {p: values[p][i] for p in parts}, sizes[i], counts[i]))
        return out

    def rows(self) -> int | None:
        """Rows of this version from the log's statistics; None when some file has none."""
        import pyarrow.compute as pc

        actions = pa.table(self.table.get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return 0
        if "num_records" not in actions.column_names:
            return None
        counts = actions.column("num_records")
        if counts.null_count:
            return None
        return int(pc.sum(counts).as_py())

    def needs_delta_spark(self) -> bool:
        """Whether only a Delta reader gets this version's rows right (its files read as Parquet
        would not: see check_readable)."""
        try:
            self.check_readable()
        except UnsupportedTableError:
            return True
        return False

    def check_readable(self) -> None:
        """Refuse tables whose rows plain Parquet reads would get wrong."""
        proto = self.table.protocol()
        features = set(proto.reader_features or [])
        mapping = self.configuration.get("delta.columnMapping.mode", "none")
        if mapping != "none" or "columnMapping" in features:
            raise UnsupportedTableError(
                f"{self.loc}: the table uses column mapping (mode {mapping}); Parquet column "
                "names do not match the table's, so this reader refuses it")
        if "deletionVectors" in features:
            raise UnsupportedTableError(
                f"{self.loc}: the table uses deletion vectors; deleted rows would come back, "
                "so this reader refuses it (purge them with REORG TABLE ... APPLY (PURGE))")
        if proto.min_reader_version > 3:
            raise UnsupportedTableError(
                f"{self.loc}: reader protocol {proto.min_reader_version} is newer than this "
                "reader understands")
        unknown = features - READABLE_FEATURES
        if unknown:
            raise UnsupportedTableError(
                f"{self.loc}: the table needs reader features {sorted(unknown)} that this "
                "reader does not implement")

    def check_writable(self, *, overwrite: bool) -> None:
        """Refuse tables whose writers must do more than add and remove Parquet files."""
        self.check_readable()
        proto = self.table.protocol()
        unknown = set(proto.writer_features or []) - WRITABLE_FEATURES
        if unknown:
            raise UnsupportedTableError(
                f"{self.loc}: the table needs writer features {sorted(unknown)} that this "
                "writer does not implement")
        config = self.configuration
        constraints = sorted(k for k in config if k.startswith("delta.constraints."))
        if constraints:
            raise UnsupportedTableError(
                f"{self.loc}: the table declares CHECK constraints {constraints}; this writer "
                "cannot enforce them")
        for f in self.schema.fields:
            keys = set(f.metadata)
            if keys & {"delta.generationExpression", "delta.invariants"} or any(
                    k.startswith("delta.identity.") for k in keys):
                raise UnsupportedTableError(
                    f"{self.loc}: column '{f.name}' is generated, an identity column or has an "
                    "invariant; this writer cannot fill or enforce it")
        if overwrite and config.get("delta.appendOnly", "false").lower() == "true":
            raise LakeError(f"{self.loc}: the table is append-only (delta.appendOnly=true); "
                            "overwrite is not allowed")
        if overwrite and config.get("delta.enableChangeDataFeed", "false").lower() == "true":
            raise UnsupportedTableError(
                f"{self.loc}: the table has the change data feed enabled; this writer does not "
                "write change data for overwrites")


def table_exists(path: str | os.PathLike[str] | TableLocation) -> bool:
    """True if `path` holds a Delta table (a readable `_delta_log`)."""
    loc = TableLocation.of(path)
    try:
        return bool(DeltaTable.is_deltatable(loc.delta_uri))
    except DeltaError:
        return False


def open_snapshot(path: str | os.PathLike[str] | TableLocation, *, version: int | None = None,
                  timestamp: dt.datetime | str | None = None, missing_ok: bool = False,
                  shared: bool = True) -> Snapshot | None:
    """The latest snapshot, or the one at `version`, or the last one committed at or before
    `timestamp` (a naive datetime is UTC). None if the table does not exist and `missing_ok`.

    shared: the snapshot may be an open table other readers of the same version share
    (`snapshots.py`): read it only. False opens one of the caller's own (to commit through)."""
    loc = TableLocation.of(path)
    if version is not None and timestamp is not None:
        raise LakeError(f"{loc}: pass version or timestamp, not both")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or version < 0):
        raise LakeError(f"{loc}: version must be an integer >= 0, got {version!r}")
    keep = shared and timestamp is None and loc.is_local
    pinned = version
    if keep:
        latest = latest_local_version(loc)
        wanted = version if version is not None else latest
        kept = None if wanted is None else KEPT_TABLES.get(loc, wanted)
        if kept is not None:
            return Snapshot(loc, kept)
        if version is not None and version == latest:
            pinned = None  # an open at the latest replays less than one pinned to it (measured)
    try:
        # At a pinned version the log is replayed up to it only (an open at the latest and a
        # time travel back would replay it twice).
        table = DeltaTable(loc.delta_uri, version=pinned)
        if version is not None and table.version() != version:
            # A commit landed after the listing: the version asked for is no longer the latest.
            table = DeltaTable(loc.delta_uri, version=version)
    except TableNotFoundError:
        if missing_ok:
            return None
        raise LakeError(f"{loc}: no Delta table here") from None
    except DeltaError as exc:
        if version is None:
            raise LakeError(f"{loc}: cannot open the table: {exc}") from exc
        latest = delta_version(loc)
        if latest is not None and version > latest:
            raise LakeError(f"{loc}: version {version} does not exist (latest is {latest})") from None
        raise LakeError(f"{loc}: cannot load version {version}: {exc}") from exc
    try:
        if timestamp is not None:
            when = _as_utc(timestamp, loc)
            table.load_as_version(when)
            _check_not_before(loc, table.version(), when)
    except DeltaError as exc:
        when_text = f"version {version}" if version is not None else f"timestamp {timestamp}"
        raise LakeError(f"{loc}: cannot load {when_text}: {exc}") from exc
    if keep:
        KEPT_TABLES.put(loc, table)
    return Snapshot(loc, table)


def _check_not_before(loc: TableLocation, version: int, when: dt.datetime) -> None:
    """delta-rs answers a timestamp before the first commit with the first version; a table
    did not exist then, so that is an error (as in Delta Spark)."""
    committed = commit_time(loc, version)
    if committed is not None and when < committed:
        raise LakeError(f"{loc}: timestamp {when.isoformat()} is before the commit of version "
                        f"{version} ({committed.isoformat()}), the earliest available")


def _as_utc(timestamp: dt.datetime | str, loc: TableLocation) -> dt.datetime:
    if isinstance(timestamp, str):
        try:
            timestamp = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
        except ValueError:
            raise LakeError(f"{loc}: timestamp {timestamp!r} is not ISO-8601") from None
    if not isinstance(timestamp, dt.datetime):
        raise LakeError(f"{loc}: timestamp must be a datetime or an ISO-8601 string, got "
                        f"{timestamp!r}")
    return timestamp.replace(tzinfo=dt.UTC) if timestamp.tzinfo is None else timestamp


def delta_version(path: str | os.PathLike[str] | TableLocation) -> int | None:
    """The latest version of the table, None if there is no table."""
    loc = TableLocation.of(path)
    if loc.is_local:
        return latest_local_version(loc)   # from the log's file names, nothing opened
    snap = open_snapshot(loc, missing_ok=True)
    return None if snap is None else snap.version


def txn_version(path: str | os.PathLike[str] | TableLocation, app_id: str) -> int | None:
    """The last committed version of application `app_id`, None if never (or no table)."""
    snap = open_snapshot(path, missing_ok=True)
    return None if snap is None else snap.txn_version(app_id)


@dataclass(frozen=True)
class TableIdentity:
    """Which table a path holds at a version: its Delta id (a table created anew at the same
    path has another) and its rows there, from the log's statistics (None: a file has none)."""

    id: str
    version: int
    rows: int | None


def table_identity(path: str | os.PathLike[str] | TableLocation, version: int) -> TableIdentity:
    snap = open_snapshot(path, version=version)
    assert snap is not None
    return TableIdentity(snap.table.metadata().id, snap.version, snap.rows())


def table_schema(path: str | os.PathLike[str] | TableLocation) -> T.StructType:
    """The latest schema, partition columns included, in table order."""
    snap = open_snapshot(path)
    assert snap is not None
    return snap.schema

