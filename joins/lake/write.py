"""Spark DataFrames into Delta tables without collecting rows, on delta-spark's transaction.

1. Staging (`stage_delta`): the write's plan (schema rules, partitioning, what a partition
   replacement removes) is checked on the driver, then a delta-spark transaction is opened on
   the table and Spark tasks write the files straight into it, with Delta's statistics and
   invariants (`txn_write.py`; the transaction itself is `temporaljoins.DeltaTxn` in the JVM).
2. The commit: one Delta commit adds the files, removes the replaced ones and records the app
   transaction; conflicts are Delta's own checks.

Until the commit the table is unchanged: written but uncommitted files are orphans that no
version references (`abandon` removes them; after a crash `vacuum_orphans` does).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import types as T

from joins.lake import txn_write
from joins.lake.errors import ConcurrentCommitError, LakeError
from joins.lake.finish import already_committed
from joins.lake.location import TableLocation
from joins.lake.model import AppTxn, CommitInfo
from joins.lake.read import partition_filter_strings
from joins.lake.schema import (
    SchemaMode,
    WriteMode,
    WritePlan,
    plan_write,
)
from joins.lake.small import write_arrow
from joins.lake.table import Snapshot, open_snapshot
from joins.spark.exprs import ident, sql_string
from joins.spark.frames import for_writing

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_TIMESTAMP_CONF = "spark.sql.parquet.outputTimestampType"


def write_delta(df: DataFrame | pa.Table | StagedWrite, path: str | os.PathLike[str], *,
                mode: WriteMode = "append", partition_by: list[str] | None = None,
                replace_partitions: Mapping[str, Sequence[Any]] | None = None,
                app_txn: AppTxn | None = None, schema_mode: SchemaMode = "enforce",
                commit_message: str | None = None, expected_version: int | None = None,
                configuration: Mapping[str, str] | None = None,
                skip_empty: bool = False, exclusive: bool = False) -> CommitInfo:
    """Write `df` to the Delta table at `path` in one commit (creating the table if needed).

    mode: "append" adds files; "overwrite" replaces the table's files, or with
        `replace_partitions` ({column: [values]}) only the files of the matching partitions
        (every written row must fall in them).
    app_txn: if the table already recorded this app id at this version or later, nothing is
        written and CommitInfo(skipped=True) comes back.
    schema_mode: "enforce" refuses columns the table lacks or of another type; "merge" adds
        new columns (nullable). Table columns missing from the data are written as nulls.
    expected_version: the commit must be version `expected_version + 1`: if anything else
        committed to the table since that version (before or during this write), nothing is
        committed and ConcurrentCommitError says so. -1 expects no table yet.
    configuration: Delta table properties set when this write creates the table (over
        NEW_TABLE_PROPERTIES).
    skip_empty: an append of no rows commits nothing (CommitInfo(version=None, files=0)).
    exclusive: like expected_version, with the version this write finds when it starts: for a
        writer under a lease, whose successor fences a paused holder by committing first
        (`remove_leftovers`). Nothing is retried over a concurrent commit.

    A small pyarrow Table (metadata, e.g. a batch log's rows) is written by delta-rs directly,
    without a Spark job; only append/overwrite, app_txn and commit_message apply to it.

    A `StagedWrite` (from `stage_delta`, whose arguments it carries: pass no others) is
    committed as staged: the files were written already, only the commit is left.
    """
    if isinstance(df, StagedWrite):
        if df.loc != TableLocation.of(path):
            raise LakeError(f"{path}: this write was staged for {df.loc}")
        return df.commit()
    if isinstance(df, pa.Table):
        if partition_by or replace_partitions or expected_version is not None or configuration:
            raise LakeError(f"{path}: an Arrow write takes only mode, app_txn and commit_message")
        return write_arrow(df, os.fspath(path), mode=mode, app_txn=app_txn,
                           commit_message=commit_message)
    return stage_delta(df, path, mode=mode, partition_by=partition_by,
                       replace_partitions=replace_partitions, app_txn=app_txn,
                       schema_mode=schema_mode, commit_message=commit_message,
                       expected_version=expected_version, configuration=configuration,
                       skip_empty=skip_empty, exclusive=exclusive).commit()


@dataclass
class StagedWrite:
    """The first half of `write_delta`: Spark tasks wrote the files into the table, but no
    version references them yet. `commit()` (or `write_delta(staged, path)`) is the second
    half; `abandon()` removes the files instead. Staging several tables' writes at once and
    committing them one by one keeps the commits in their order while their Spark jobs overlap.
    """

    loc: TableLocation
    txn: txn_write.TxnWrite | None       # None: nothing to commit (`answer` says why)
    answer: CommitInfo | None = None

    @property
    def pending(self) -> bool:
        """Whether files wait for this write's commit (or abandon)."""
        return self.txn is not None

    def commit(self) -> CommitInfo:
        if self.txn is not None:
            txn, self.txn = self.txn, None   # committed or abandoned, never both
            self.answer = txn.commit()
        assert self.answer is not None
        return self.answer

    def abandon(self) -> None:
        if self.txn is not None:
            txn, self.txn = self.txn, None
            txn.abandon()
            self.answer = CommitInfo(version=None, skipped=False, files=0, rows=0)


# Properties of a table a write creates, unless the caller sets them. A checkpoint every 100
# commits (delta-rs's default), not delta-spark's 10: a checkpoint is a Spark job costing several
# times a small write, which every tenth micro-batch of every table would pay. Readers lose
# little: the version checksum lists a table's files (joins/spark/delta_jars.py), sparing most of
# them the log replay.
NEW_TABLE_PROPERTIES = {"delta.checkpointInterval": "100"}


def stage_delta(df: DataFrame, path: str | os.PathLike[str], *, mode: WriteMode = "append",
                partition_by: list[str] | None = None,
                replace_partitions: Mapping[str, Sequence[Any]] | None = None,
                app_txn: AppTxn | None = None, schema_mode: SchemaMode = "enforce",
                commit_message: str | None = None, expected_version: int | None = None,
                configuration: Mapping[str, str] | None = None,
                skip_empty: bool = False, exclusive: bool = False) -> StagedWrite:
    """`write_delta` up to its commit (same arguments): the table as this write finds it is
    the one the commit checks against (`exclusive`, `expected_version`, the app transaction)."""
    loc = TableLocation.of(path)
    _check_arguments(loc, mode, schema_mode, replace_partitions, app_txn, partition_by)
    configuration = {**NEW_TABLE_PROPERTIES, **(configuration or {})}
    snap = open_snapshot(loc, missing_ok=True)
    _check_expected(loc, snap, expected_version)
    if snap is not None:
        snap.check_writable(overwrite=mode == "overwrite")
        if app_txn is not None and already_committed(snap, app_txn):
            return StagedWrite(loc, None, CommitInfo(version=None, skipped=True, files=0, rows=0))
    plan = plan_write(df.schema, snap.schema if snap else None,
                      snap.partition_by if snap else None, partition_by=partition_by,
                      schema_mode=schema_mode, table=str(loc))
    replace = (partition_filter_strings(loc, plan.schema, plan.partition_by, replace_partitions,
                                        what="replace_partitions")
               if replace_partitions is not None else None)
    staged = txn_write.stage(
        _prepared(df, plan), loc, plan, replace, mode=mode, app_txn=app_txn,
        commit_message=commit_message, expected_version=expected_version,
        found_version=None if snap is None else snap.version, exclusive=exclusive,
        skip_empty=skip_empty, configuration=configuration)
    if isinstance(staged, CommitInfo):
        return StagedWrite(loc, None, staged)
    return StagedWrite(loc, staged)


def _check_expected(loc: TableLocation, snap: Snapshot | None, expected: int | None) -> None:
    if expected is None:
        return
    actual = -1 if snap is None else snap.version
    if actual != expected:
        raise ConcurrentCommitError(
            f"{loc}: expected the table at version {expected} but it is at {actual}: another "
            "writer committed meanwhile; nothing was committed")


def _check_arguments(loc: TableLocation, mode: str, schema_mode: str,
                     replace_partitions: Mapping[str, Sequence[Any]] | None,
                     app_txn: AppTxn | None, partition_by: list[str] | None) -> None:
    if mode not in ("append", "overwrite"):
        raise LakeError(f"{loc}: mode must be 'append' or 'overwrite', got {mode!r}")
    if schema_mode not in ("enforce", "merge"):
        raise LakeError(f"{loc}: schema_mode must be 'enforce' or 'merge', got {schema_mode!r}")
    if replace_partitions is not None:
        if mode != "overwrite":
            raise LakeError(f"{loc}: replace_partitions needs mode='overwrite'")
        if not replace_partitions:
            raise LakeError(f"{loc}: replace_partitions is empty; pass None to overwrite the "
                            "whole table")
    if app_txn is not None and not isinstance(app_txn, AppTxn):
        raise LakeError(f"{loc}: app_txn must be an AppTxn, got {app_txn!r}")
    if partition_by is not None and (isinstance(partition_by, str)
                                     or not all(isinstance(p, str) for p in partition_by)):
        raise LakeError(f"{loc}: partition_by must be a list of column names, got "
                        f"{partition_by!r}")


def _prepared(df: DataFrame, plan: WritePlan) -> DataFrame:
    """The frame as the table takes it: its columns in order, NOT NULL checked in the tasks."""
    spark = df.sparkSession
    if _has_timestamp(plan.schema) and spark.conf.get(_TIMESTAMP_CONF, None) != "TIMESTAMP_MICROS":
        # Spark's default INT96 timestamps are deprecated in Parquet and read back differently
        # by other Delta readers; Delta writers use INT64 microseconds.
        spark.conf.set(_TIMESTAMP_CONF, "TIMESTAMP_MICROS")
    data = df
    if df.columns != plan.columns or plan.not_null:
        # Every Dataset call is an analysis on the driver (a few ms of a micro-batch): a frame
        # that is already the table's columns in order, with nothing to check, is written as is.
        data = df.selectExpr(*[_guarded(c, plan) for c in plan.columns])
    return for_writing(data)


def _guarded(name: str, plan: WritePlan) -> str:
    """The column as SQL text (one JVM call per column, `joins.spark.exprs`)."""
    column = ident(name)
    if name not in plan.not_null:
        return column
    # Checked in the tasks while writing; no pass over the data on the driver.
    failure = sql_string(f"column '{name}' is NOT NULL in the table but the data has a null")
    return f"CASE WHEN {column} IS NULL THEN raise_error({failure}) ELSE {column} END AS {column}"


def _has_timestamp(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.StructType):
        return any(_has_timestamp(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _has_timestamp(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _has_timestamp(data_type.keyType) or _has_timestamp(data_type.valueType)
    return isinstance(data_type, T.TimestampType)
