"""Files a crashed writer left behind: written for a commit that never landed.

`write_delta` has Spark tasks write a write's files into the table directory before its
commit; a writer killed in between leaves them, invisible to readers but taking space. The
next run of the same ingest source or join removes them, under its lease.

The lease makes that run the only live writer, but not the only possible one: a previous
holder paused past its lease's expiry may wake up and commit files it staged. So before
deleting, the run commits a "fence" to the table (an app transaction of its own, nothing
else). Every writer that can leave leftovers commits version-guarded (`expected_version`, or
`exclusive`), and a guarded transaction reads the fence's app id, so the paused writer's
commit then fails instead of committing files that no longer exist. Only files older than the
fence are removed: a file written after it belongs to a write that planned against the fenced
version, which may still commit it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from joins.lake import txn_write
from joins.lake.location import TableLocation
from joins.lake.table import table_exists
from joins.lake.vacuum import vacuum_orphans

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# File modification times on some filesystems have a resolution of a second or two; a file
# written just before the fence must still count as before it.
_MTIME_SLACK = dt.timedelta(seconds=2)


def remove_leftovers(spark: SparkSession, paths: Sequence[str], *, writer: str,
                     before_commit: Callable[[], None]) -> dict[str, list[str]]:
    """Remove the uncommitted files of the tables at `paths` (those that exist). Returns
    {table: removed files relative to it}; tables without leftovers are not touched (no
    commit). `writer` names the ingest source or join in the fence's commit message;
    `before_commit` is the lease check."""
    removed: dict[str, list[str]] = {}
    for path in paths:
        if not table_exists(path):
            continue  # a crashed first write: the next commit creates the table, a later run cleans
        if not vacuum_orphans(path, older_than=dt.timedelta(0), dry_run=True):
            continue
        before_commit()
        fenced_at = dt.datetime.now(dt.UTC) - _MTIME_SLACK
        txn_write.fence(spark, TableLocation.of(path), writer)
        older_than = max(dt.timedelta(0), dt.datetime.now(dt.UTC) - fenced_at)
        removed[path] = vacuum_orphans(path, older_than=older_than)
    return removed
