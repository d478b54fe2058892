"""Every Spark write is committed by delta-spark's own transaction (issue 26).

A write has `stage_delta`'s two halves. Staging opens a transaction on the table
(`DeltaLog.startTransaction`; for a table that does not exist yet, on a snapshot whose checksum
lists no files: `temporaljoins.NewTable`) and has Spark tasks write the files straight into the
table (`writeFiles`: Delta's own writer, statistics and invariants); committing is one
`OptimisticTransaction.commit` of those files, the replaced files' removals and the app
transaction. Until then no version references the files (a crash leaves orphans for
`vacuum_orphans`).

The transaction lives in the JVM (`temporaljoins.DeltaTxn`, joins/spark/jvm): a classic session
calls it through py4j, a Spark Connect client through the server's `TxnPlugin` (a relation
extension whose one row is the answer). One protocol, JSON requests and answers, serves both.

The guarantees, on what Delta checks itself:
- Idempotence: the app transaction's last version is read from the snapshot's version checksum
  (`.crc`, written by every delta-spark commit; 4.4.0's own `txnVersion` would replay the log in
  three Spark jobs, docs/lake.md) and the app id is registered as read, so a concurrent commit of
  it fails this one (`ConcurrentTransactionException`); without a checksum, `txnVersion`.
- `expected_version` / `exclusive`: the transaction's read version must be the one expected, and
  it reads the whole table and the fence's app id (`DeltaTxn.FENCE_APP`), so any commit after it
  began that adds or removes files, changes metadata, or fences (`fence`) fails it.
- Partition replacement: the matching files (from the checksum's file list, else the snapshot)
  are removed in the same commit; every written file must fall in the replaced partitions.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from joins.lake.errors import ConcurrentCommitError, LakeError
from joins.lake.finish import app_txn_committed
from joins.lake.location import TableLocation
from joins.lake.model import AppTxn, CommitInfo, partitions_of
from joins.spark.connect import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.lake.schema import WritePlan

@dataclass
class TxnWrite:
    """A staged write on a delta-spark transaction: files written, commit pending."""

    loc: TableLocation
    spark: SparkSession
    request_id: str
    added: list[tuple[str, dict[str, str | None], int]]  # path, partition values, rows
    app_txn: AppTxn | None = None
    guarded: bool = False

    def commit(self) -> CommitInfo:
        answer = call(self.spark, "commit", self.request_id)
        state = answer["state"]
        if state == "failed":
            # Landed or not, the log cannot say here: the files stay for vacuum_orphans.
            raise LakeError(f"{self.loc}: commit failed ({answer['message']}); its files stay for "
                            "vacuum_orphans")
        if state == "skipped":     # it lost a creation race to the same app transaction
            self.added = []
            return CommitInfo(version=None, skipped=True, files=0, rows=0)
        if state == "conflict":
            self.added = []
            if self.app_txn is not None and app_txn_committed(self.loc, self.app_txn):
                return CommitInfo(version=None, skipped=True, files=0, rows=0)
            if self.guarded:
                raise ConcurrentCommitError(f"{self.loc}: another writer committed to the table "
                                            f"meanwhile ({answer['conflict']}); nothing was "
                                            "committed")
            raise LakeError(f"{self.loc}: commit failed ({answer['conflict']}), nothing was "
                            "written")
        return CommitInfo(version=int(answer["version"]), skipped=False, files=len(self.added),
                          rows=sum(rows for _, _, rows in self.added),
                          partitions=partitions_of(p for _, p, _ in self.added))

    def abandon(self) -> None:
        call(self.spark, "abandon", self.request_id)
        self.added = []


def call(spark: SparkSession, operation: str, request: str,
         data: DataFrame | None = None) -> dict[str, Any]:
    """One DeltaTxn operation: through py4j in a classic session, through the Connect server's
    TxnPlugin otherwise."""
    if is_connect(spark):
        from joins.lake.txn_connect import call_plugin

        return json.loads(call_plugin(spark, operation, request, data))
    from joins.spark.jvm import unavailable_reason
    from joins.spark.names import jvm_class

    reason = unavailable_reason(spark)
    if reason is not None:
        raise LakeError(f"writing a Delta table needs the engine's JVM classes (joins/spark/jvm, "
                        f"built with javac from a JDK 17+): {reason}")
    jvm = spark._jvm
    assert jvm is not None
    txn = jvm_class(jvm, "temporaljoins.DeltaTxn")
    if operation == "stage":
        assert data is not None
        return json.loads(txn.stage(spark._jsparkSession, data._jdf, request))
    if operation == "fence":
        return json.loads(txn.fence(spark._jsparkSession, request))
    return json.loads(getattr(txn, operation)(request))


def stage(data: DataFrame, loc: TableLocation, plan: WritePlan,
          replace: dict[str, set[str]] | None, *, mode: str, app_txn: AppTxn | None,
          commit_message: str | None, expected_version: int | None, found_version: int | None,
          exclusive: bool, skip_empty: bool,
          configuration: dict[str, str] | None) -> TxnWrite | CommitInfo:
    """`write_delta`'s first half on a delta-spark transaction (`data`: the table's columns,
    checked as `write.py` prepares them; `found_version` None: the write creates the table, as
    version 0 of the same transaction). A CommitInfo when nothing is left to commit."""
    spark = data.sparkSession
    guarded = expected_version is not None or exclusive
    if expected_version is not None:
        expected = expected_version
    else:
        expected = found_version if found_version is not None else -1
    # Columns the table lacks are added by the commit itself (its metadata), so a guarded
    # write stays one commit that either lands whole or not at all.
    add_columns = bool(plan.new_columns) and found_version is not None
    request_id = str(uuid.uuid4())
    request = {
        "id": request_id, "path": loc.spark_path(), "mode": mode, "partitionBy": plan.partition_by,
        "schema": plan.schema.json(), "configuration": configuration or {},
        "replace": None if replace is None else {c: sorted(v) for c, v in replace.items()},
        "appId": None if app_txn is None else app_txn.app_id,
        "appVersion": None if app_txn is None else app_txn.version,
        "guarded": guarded, "expected": expected if guarded else None,
        "skipEmpty": skip_empty, "message": commit_message, "addColumns": add_columns}
    answer = call(spark, "stage", json.dumps(request), data)
    state = answer["state"]
    if state == "conflict":
        raise ConcurrentCommitError(f"{loc}: {answer['message']}: another writer committed "
                                    "meanwhile; nothing was committed")
    if state == "skipped":
        return CommitInfo(version=None, skipped=True, files=0, rows=0)
    if state == "empty":
        return CommitInfo(version=None, skipped=False, files=0, rows=0)
    if state == "outside":
        column = answer["column"]
        assert replace is not None
        raise LakeError(f"{loc}: the data has rows with {column}={answer.get('value')!r}, outside "
                        f"replace_partitions[{column!r}]={sorted(replace[column])}; nothing was "
                        "committed")
    added = [(unquote(f["path"]), f["partition"], int(f["rows"])) for f in answer["files"]]
    return TxnWrite(loc, spark, request_id, added, app_txn=app_txn, guarded=guarded)


def fence(spark: SparkSession, loc: TableLocation, writer: str) -> int:
    """Commit the fence's app transaction (nothing else): every guarded transaction begun
    before it then fails at its commit. Returns the new version."""
    message = f"{writer}: fence before removing the files of a write that never committed"
    answer = call(spark, "fence", json.dumps({"path": loc.spark_path(), "message": message}))
    return int(answer["version"])
