"""Files a crashed ingest left behind: written for a commit that never landed.

`write_delta` stages a write's files in the table directory before its commit; a run killed in
between leaves them (`_staging/...` or already moved into place), invisible to readers but
taking space. The next run of the source removes them, under the source's lease. The lease
makes that run the only live writer, but not the only possible one: a previous holder that was
paused past its lease's expiry may wake up and commit files it staged. So before deleting, the
run commits an empty "fence" commit to the table; every ingest commit is guarded by the table
version it was planned against, so the paused writer's commit then fails instead of
committing files that no longer exist. Orphans of any age can then go.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def remove_leftovers(spark: SparkSession, paths: Sequence[str], *, source_id: str,
                     before_commit: Callable[[], None]) -> dict[str, list[str]]:
    """Remove the uncommitted files of the tables at `paths` (those that exist). Returns
    {table: removed files relative to it}; tables without leftovers are not touched."""
    from joins.lake import delta_version, read_delta, table_exists, vacuum_orphans, write_delta

    removed: dict[str, list[str]] = {}
    for path in paths:
        if not table_exists(path):
            continue  # a crashed first write: the next commit creates the table, a later run cleans
        if not vacuum_orphans(path, older_than=dt.timedelta(0), dry_run=True):
            continue
        before_commit()
        version = delta_version(path)
        assert version is not None
        write_delta(read_delta(spark, path).limit(0), path, mode="append", expected_version=version,
                    commit_message=f"{source_id}: fence before removing the files of a write that "
                                   f"never committed")
        removed[path] = vacuum_orphans(path, older_than=dt.timedelta(0))
    return removed
