"""Writes committed by delta-spark's own transaction (issue 26, point 3), opt-in while the old
path exists: `TJ_DELTA_WRITER=delta-spark` (classic sessions; Spark Connect keeps the delta-rs
path, having no py4j).

The write keeps `stage_delta`'s two halves. Staging opens a transaction on the table
(`DeltaLog.startTransaction`) and has Spark tasks write the files straight into the table
(`writeFiles`: Delta's own writer, statistics and invariants); committing is one
`OptimisticTransaction.commit` of those files, the replaced files' removals and the app
transaction. Until then no version references the files (a crash leaves orphans for
`vacuum_orphans`, as before).

The guarantees, on what Delta checks itself:
- Idempotence: the app transaction's last version is read from the snapshot's version checksum
  (`.crc`, written by every delta-spark commit; 4.4.0's own `txnVersion` would replay the log in
  three Spark jobs, docs/lake.md) and the app id is registered as read, so a concurrent commit of
  it fails this one (`ConcurrentTransactionException`); without a checksum, `txnVersion`.
- `expected_version` / `exclusive`: the transaction's read version must be the one expected, and
  it reads the whole table and the fence's app id (`FENCE_APP`), so any commit after it began
  that adds or removes files, changes metadata, or fences (`fence`) fails it.
- Partition replacement: the matching files (from the checksum's file list, else the snapshot)
  are removed in the same commit; every written file must fall in the replaced partitions.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins.lake.errors import ConcurrentCommitError, LakeError
from joins.lake.location import TableLocation
from joins.lake.model import AppTxn, CommitInfo
from joins.spark.connect import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

log = logging.getLogger(__name__)

WRITER_ENV = "TJ_DELTA_WRITER"
# The app id a successor's fence commits and every guarded transaction reads.
FENCE_APP = "temporal_joins.fence"
_CONFLICTS = ("ConcurrentTransactionException", "ConcurrentAppendException",
              "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
              "MetadataChangedException", "ProtocolChangedException",
              "ConcurrentWriteException")


def use_delta_spark(spark: SparkSession) -> bool:
    return os.environ.get(WRITER_ENV, "delta-rs") == "delta-spark" and not is_connect(spark)


@dataclass
class TxnWrite:
    """A staged write on a delta-spark transaction: files written, commit pending."""

    loc: TableLocation
    spark: SparkSession
    txn: Any                                   # OptimisticTransaction (py4j)
    adds: Any                                  # Seq[FileAction] the tasks wrote
    added: list[tuple[str, dict[str, str | None], int]]  # path, partition values, rows
    removes: list[Any] = field(default_factory=list)
    app_txn: AppTxn | None = None
    overwrite: bool = False
    partition_by: list[str] = field(default_factory=list)
    commit_message: str | None = None
    guarded: bool = False

    def commit(self) -> CommitInfo:
        jvm = self.spark._jvm
        assert jvm is not None
        delta = jvm.org.apache.spark.sql.delta
        actions = self.adds.toList()
        for remove in self.removes:
            actions = actions.appended(remove)
        if self.app_txn is not None:
            now = jvm.scala.Some(jvm.java.lang.Long(int(time.time() * 1000)))
            actions = actions.appended(delta.actions.SetTransaction(
                self.app_txn.app_id, self.app_txn.version, now))
        try:
            version = int(self.txn.commit(actions.toSeq(), _operation(jvm, self)))
        except Exception as exc:
            conflict = conflict_name(exc)
            if conflict is None:
                # Landed or not, the log cannot say here: the files stay for vacuum_orphans.
                raise LakeError(f"{self.loc}: commit failed ({exc}); its files stay for "
                                "vacuum_orphans") from exc
            self.abandon()
            if self.app_txn is not None and app_txn_committed(self.spark, self.loc, self.app_txn):
                return CommitInfo(version=None, skipped=True, files=0, rows=0)
            if self.guarded:
                raise ConcurrentCommitError(f"{self.loc}: another writer committed to the table "
                                            f"meanwhile ({conflict}); nothing was committed") \
                    from exc
            raise LakeError(f"{self.loc}: commit failed ({conflict}), nothing was written") \
                from exc
        parts = {tuple(sorted(p.items())) for _, p, _ in self.added}
        return CommitInfo(version=version, skipped=False, files=len(self.added),
                          rows=sum(rows for _, _, rows in self.added),
                          partitions=tuple(sorted(parts, key=lambda p: [(k, v or "") for k, v in p])))

    def abandon(self) -> None:
        for path, _, _ in self.added:
            folder, _, name = path.rpartition("/")
            # Hadoop's local file system writes a checksum beside each file (`.<name>.crc`).
            sidecar = f"{folder}/.{name}.crc" if folder else f".{name}.crc"
            for rel in (path, sidecar):
                try:
                    self.loc.fs.delete_file(self.loc.fs_path(rel))
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    log.warning("%s: could not remove uncommitted file %s: %s", self.loc, rel, exc)
        self.added = []


def _operation(jvm: Any, write: TxnWrite) -> Any:
    none = jvm.scala.Option.empty()
    mode = jvm.org.apache.spark.sql.SaveMode
    partition_by = jvm.scala.Some(scala_list(jvm, write.partition_by)) if write.partition_by else none
    message = jvm.scala.Some(write.commit_message) if write.commit_message else none
    return jvm.org.apache.spark.sql.delta.DeltaOperations.Write(
        mode.Overwrite if write.overwrite else mode.Append, partition_by, none, message,
        none, none, none, none, none)


def scala_list(jvm: Any, items: list[Any]) -> Any:
    array = jvm.java.util.ArrayList()
    for item in items:
        array.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(array).toList()


def conflict_name(exc: Exception) -> str | None:
    text = str(exc)
    return next((name for name in _CONFLICTS if name in text), None)


def app_txn_committed(spark: SparkSession, loc: TableLocation, app_txn: AppTxn) -> bool:
    from joins.lake.table import open_snapshot

    snap = open_snapshot(loc, missing_ok=True)
    done = None if snap is None else snap.txn_version(app_txn.app_id)
    return done is not None and done >= app_txn.version


def start(spark: SparkSession, loc: TableLocation) -> Any:
    jvm = spark._jvm
    assert jvm is not None
    return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, loc.spark_path()).startTransaction()


def done_version(txn: Any, app_id: str) -> int:
    """The app id's last committed version as of the transaction's snapshot (-1: none), read
    from the version checksum when it carries the app transactions."""
    checksum = txn.snapshot().checksumOpt()
    if checksum.isEmpty() or checksum.get().setTransactions().isEmpty():
        return int(txn.txnVersion(app_id))
    txn.readTxn().addOne(app_id)
    done = -1
    txns = checksum.get().setTransactions().get().iterator()
    while txns.hasNext():
        entry = txns.next()
        if entry.appId() == app_id:
            done = max(done, int(entry.version()))
    return done


def guard(txn: Any, loc: TableLocation, expected: int) -> None:
    if int(txn.readVersion()) != expected:
        raise ConcurrentCommitError(
            f"{loc}: expected the table at version {expected} but it is at "
            f"{int(txn.readVersion())}: another writer committed meanwhile; nothing was committed")
    txn.readWholeTable()
    done_version(txn, FENCE_APP)


def written_files(adds: Any) -> list[tuple[str, dict[str, str | None], int]]:
    from urllib.parse import unquote

    out = []
    files = adds.iterator()
    while files.hasNext():
        add = files.next()
        values = _partition_values(add)
        stats = add.stats()
        rows = int(json.loads(stats).get("numRecords", 0)) if stats else 0
        out.append((unquote(add.path()), values, rows))
    return out


def _partition_values(add: Any) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    entries = add.partitionValues().iterator()
    while entries.hasNext():
        entry = entries.next()
        values[entry._1()] = entry._2()
    return values


def current_files(txn: Any) -> list[Any]:
    """The snapshot's files (AddFile objects): from the checksum when it lists them (small
    tables), else from the snapshot's state."""
    checksum = txn.snapshot().checksumOpt()
    if not checksum.isEmpty() and not checksum.get().allFiles().isEmpty():
        seq = checksum.get().allFiles().get()
    else:
        seq = txn.filterFiles()
    out = []
    files = seq.iterator()
    while files.hasNext():
        out.append(files.next())
    return out


def stage(data: DataFrame, loc: TableLocation, partition_by: list[str],
          new_columns: list[T.StructField],
          replace: dict[str, set[str]] | None, *, mode: str, app_txn: AppTxn | None,
          commit_message: str | None, expected_version: int | None, found_version: int | None,
          exclusive: bool, skip_empty: bool) -> TxnWrite | CommitInfo:
    """`write_delta`'s first half on a delta-spark transaction, for a table that exists
    (`data`: the table's columns, checked as `write.py` prepares them). A CommitInfo when
    nothing is left to commit."""
    spark = data.sparkSession
    guarded = expected_version is not None or exclusive
    expected = expected_version if expected_version is not None else found_version
    if new_columns:
        if guarded:
            raise LakeError(f"{loc}: a version-guarded write cannot add columns "
                            f"({[f.name for f in new_columns]}); nothing was committed")
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in new_columns)
        spark.sql(f"ALTER TABLE delta.`{loc.spark_path()}` ADD COLUMNS ({columns})")
    txn = start(spark, loc)
    if guarded:
        assert expected is not None
        guard(txn, loc, expected)
    if app_txn is not None and done_version(txn, app_txn.app_id) >= app_txn.version:
        return CommitInfo(version=None, skipped=True, files=0, rows=0)
    adds = txn.writeFiles(data._jdf)
    write = TxnWrite(loc, spark, txn, adds, written_files(adds), app_txn=app_txn,
                     overwrite=mode == "overwrite", partition_by=partition_by,
                     commit_message=commit_message, guarded=guarded)
    if skip_empty and mode == "append" and not write.added:
        return CommitInfo(version=None, skipped=False, files=0, rows=0)
    if replace is not None:
        for _, values, _ in write.added:
            for column, allowed in replace.items():
                if values.get(column) not in allowed:
                    write.abandon()
                    raise LakeError(f"{loc}: the data has rows with {column}={values.get(column)!r}"
                                    f", outside replace_partitions[{column!r}]={sorted(allowed)}; "
                                    "nothing was committed")
    if mode == "overwrite":
        txn.readWholeTable()   # a concurrent change to what is replaced conflicts
        now = int(time.time() * 1000)
        for add in current_files(txn):
            values = _partition_values(add)
            if replace is None or all(values.get(c) in allowed for c, allowed in replace.items()):
                write.removes.append(add.removeWithTimestamp(now, True))
    return write
