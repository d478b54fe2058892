"""Creating a table and fencing one, on delta-spark (the `TJ_DELTA_WRITER=delta-spark` path of
`txn_write.py`)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from joins.lake.errors import ConcurrentCommitError
from joins.lake.location import TableLocation
from joins.lake.model import AppTxn, CommitInfo
from joins.lake.txn_write import (
    FENCE_APP,
    app_txn_committed,
    conflict_name,
    done_version,
    scala_list,
    start,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def create(data: DataFrame, loc: TableLocation, partition_by: list[str],
           configuration: dict[str, str] | None, *, app_txn: AppTxn | None,
           commit_message: str | None, guarded: bool) -> CommitInfo:
    """A new table with its first files in version 0, by delta-spark's writer: a new table has
    no state to replay, so its app transaction costs nothing there. It commits at once (the one
    write that is not two-phase); a writer that loses the race to create appends to the
    winner's table unless it is guarded. An empty frame creates the table without files
    (`skip_empty` cannot know it is empty without running the frame, and a second run would
    consume the observations a caller set on it)."""
    from joins.lake.log import commit_actions
    from joins.lake.table import delta_version

    def save(mode: str) -> None:
        writer = data.write.format("delta").mode(mode)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        for key, value in (configuration or {}).items():
            writer = writer.option(key, value)
        if app_txn is not None:
            writer = writer.option("txnAppId", app_txn.app_id) \
                .option("txnVersion", str(app_txn.version))
        if commit_message:
            writer = writer.option("userMetadata", commit_message)
        writer.save(loc.spark_path())

    try:
        save("error" if guarded else "append")
    except Exception as exc:
        lost = "already exists" in str(exc).lower() or conflict_name(exc) is not None
        if not lost:
            raise
        if guarded:
            raise ConcurrentCommitError(f"{loc}: another writer created the table meanwhile; "
                                        "nothing was committed") from exc
        if app_txn is not None and app_txn_committed(data.sparkSession, loc, app_txn):
            return CommitInfo(version=None, skipped=True, files=0, rows=0)
        save("append")
    version = delta_version(loc)
    assert version is not None
    if app_txn is not None and version > 0 and not _committed_at(loc, version, app_txn):
        return CommitInfo(version=None, skipped=True, files=0, rows=0)
    adds = [a["add"] for a in commit_actions(loc, version) if "add" in a]
    rows = sum(int(json.loads(a["stats"]).get("numRecords", 0)) for a in adds if a.get("stats"))
    parts = {tuple(sorted((a.get("partitionValues") or {}).items())) for a in adds}
    return CommitInfo(version=version, skipped=False, files=len(adds), rows=rows,
                      partitions=tuple(sorted(parts, key=lambda p: [(k, v or "") for k, v in p])))


def _committed_at(loc: TableLocation, version: int, app_txn: AppTxn) -> bool:
    from joins.lake.log import commit_actions

    return any(a.get("txn", {}).get("appId") == app_txn.app_id
               and a["txn"].get("version") == app_txn.version for a in commit_actions(loc, version))


def fence(spark: SparkSession, loc: TableLocation, writer: str) -> int:
    """Commit the fence's app transaction (nothing else): every guarded transaction begun
    before it then fails at its commit. Returns the new version."""
    txn = start(spark, loc)
    jvm = spark._jvm
    assert jvm is not None
    delta = jvm.org.apache.spark.sql.delta
    now = int(time.time() * 1000)
    version = max(done_version(txn, FENCE_APP) + 1, now)
    action = delta.actions.SetTransaction(FENCE_APP, version, jvm.scala.Some(jvm.java.lang.Long(now)))
    none = jvm.scala.Option.empty()
    operation = delta.DeltaOperations.Write(
        jvm.org.apache.spark.sql.SaveMode.Append, none, none,
        jvm.scala.Some(f"{writer}: fence before removing the files of a write that never "
                       "committed"), none, none, none, none, none)
    return int(txn.commit(scala_list(jvm, [action]), operation))
