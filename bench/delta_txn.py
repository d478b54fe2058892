"""A candidate for the runtime's writes on delta-spark (issue 26, point 3), measured by
bench/delta_write.py as the method "delta-txn": an idempotent append on delta-spark's own
`OptimisticTransaction` (classic sessions, through py4j) instead of `DataFrameWriter`.

Why: delta-spark 4.4.0's writer answers `txnVersion` from the snapshot's replayed state, three
Spark jobs per commit (docs/lake.md, "What delta-spark's commit costs"). The transaction API
lets the app transaction come from the version checksum (`<version>.crc`, written by every
delta-spark commit) and is two-phase like the project's writer: the tasks write the files
(`writeFiles`), then one `commit` adds them with the `SetTransaction`. The app id is registered
as read (`readTxn`), so a concurrent commit of the same app id still fails this one
(`ConcurrentTransactionException`), as Delta's own `txnVersion` would arrange.

Not the product yet: no version guard (`expected_version`), no replacement of partitions, no
Spark Connect form; a table without a checksum falls back to `txnVersion`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _txn_from_checksum(snapshot: Any, app_id: str) -> int | None:
    """The app id's last version per the snapshot's checksum; None when the checksum does not
    carry the app transactions (no .crc, or more app ids than Delta keeps there)."""
    checksum = snapshot.checksumOpt()
    if checksum.isEmpty() or checksum.get().setTransactions().isEmpty():
        return None
    done = -1
    txns = checksum.get().setTransactions().get().iterator()
    while txns.hasNext():
        txn = txns.next()
        if txn.appId() == app_id:
            done = max(done, txn.version())
    return done


def append_once(df: DataFrame, path: str, app_id: str, version: int) -> int | None:
    """Append `df` to the Delta table at `path` with the app transaction (app_id, version) in the
    same commit; the committed version, or None when that app transaction was committed before."""
    spark = df.sparkSession
    jvm = spark._jvm
    assert jvm is not None, "a classic session (py4j) is needed"
    delta = jvm.org.apache.spark.sql.delta
    txn = delta.DeltaLog.forTable(spark._jsparkSession, path).startTransaction()
    done = _txn_from_checksum(txn.snapshot(), app_id)
    if done is None:
        done = txn.txnVersion(app_id)          # Delta's own lookup: the replayed state
    else:
        txn.readTxn().addOne(app_id)           # conflict on a concurrent commit of this app id
    if done >= version:
        return None
    files = txn.writeFiles(df._jdf)
    now = jvm.scala.Some(jvm.java.lang.Long(int(time.time() * 1000)))
    actions = files.toList().appended(delta.actions.SetTransaction(app_id, version, now)).toSeq()
    none = jvm.scala.Option.empty()
    operation = delta.DeltaOperations.Write(jvm.org.apache.spark.sql.SaveMode.Append, none, none,
                                            none, none, none, none, none, none)
    return int(txn.commit(actions, operation))
