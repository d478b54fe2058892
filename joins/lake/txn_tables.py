"""Creating a table and fencing one, on delta-spark (the `TJ_DELTA_WRITER=delta-spark` path of
`txn_write.py`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from joins.lake.errors import ConcurrentCommitError
from joins.lake.location import TableLocation
from joins.lake.model import AppTxn, CommitInfo
from joins.lake.txn_write import app_txn_committed, call, conflict_name

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
    from joins.lake.log import commit_info, records_txn
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
        if app_txn is not None and app_txn_committed(loc, app_txn):
            return CommitInfo(version=None, skipped=True, files=0, rows=0)
        save("append")
    version = delta_version(loc)
    assert version is not None
    if app_txn is not None and version > 0 and not records_txn(loc, version, app_txn):
        return CommitInfo(version=None, skipped=True, files=0, rows=0)
    return commit_info(loc, version, skipped=False)


def fence(spark: SparkSession, loc: TableLocation, writer: str) -> int:
    """Commit the fence's app transaction (nothing else): every guarded transaction begun
    before it then fails at its commit. Returns the new version."""
    message = f"{writer}: fence before removing the files of a write that never committed"
    answer = call(spark, "fence", json.dumps({"path": loc.spark_path(), "message": message}))
    return int(answer["version"])
