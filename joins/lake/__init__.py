"""Delta Lake I/O for Spark. A table that needs a Delta reader (deletion vectors, column
mapping) and the change data feed are read by delta-spark; other tables, and the rows a range
of appends added, from their files; Spark writes are delta-spark transactions (files written
by Spark tasks straight into the table, one commit); delta-rs (the `deltalake` package) reads
logs and snapshots and writes small metadata tables without Spark. This package is the only
place in the project that imports `deltalake`.

    read_delta / read_changes      Delta table (version, timestamp, increment) -> DataFrame
    read_change_feed               a table's change data feed (inserts, updates, deletes)
    write_delta                    DataFrame -> one Delta commit, idempotent with an AppTxn
    stage_delta                    write_delta up to its commit (files written, not committed)
    append_rows                    a producer's few rows from the driver (a replay's records)
    vacuum_orphans                 remove files of writes that never committed
    remove_leftovers               the same under a writer's lease, fencing a paused writer first
    table_properties               Delta table properties (set_table_properties records new ones)
    Lease                          one writer at a time (a join, an ingest source)
    table_summary                  rows (per partition), min / max: from the log's statistics
"""

from joins.lake.changes import ChangeStats, change_stats, read_changes
from joins.lake.errors import (
    ConcurrentCommitError,
    LakeError,
    SchemaMismatchError,
    UnsupportedTableError,
)
from joins.lake.feed import change_feed_enabled, read_change_feed
from joins.lake.finish import committed_write
from joins.lake.lease import Lease, LeaseLostError, LeaseRecord, WriterBusyError
from joins.lake.leftovers import remove_leftovers
from joins.lake.model import AppTxn, CommitInfo
from joins.lake.producer import append_rows
from joins.lake.properties import set_table_properties, table_properties
from joins.lake.read import read_delta
from joins.lake.small import SmallTable, open_small, read_arrow, write_arrow
from joins.lake.summary import TableSummary, commit_rows_by_partition, table_summary
from joins.lake.table import (
    TableIdentity,
    delta_version,
    table_exists,
    table_identity,
    table_schema,
    txn_version,
)
from joins.lake.vacuum import vacuum_orphans
from joins.lake.write import StagedWrite, stage_delta, write_delta

__all__ = [
    "AppTxn",
    "ChangeStats",
    "CommitInfo",
    "ConcurrentCommitError",
    "LakeError",
    "Lease",
    "LeaseLostError",
    "LeaseRecord",
    "SchemaMismatchError",
    "SmallTable",
    "StagedWrite",
    "TableIdentity",
    "TableSummary",
    "UnsupportedTableError",
    "WriterBusyError",
    "append_rows",
    "change_feed_enabled",
    "change_stats",
    "commit_rows_by_partition",
    "committed_write",
    "delta_version",
    "open_small",
    "read_arrow",
    "read_change_feed",
    "read_changes",
    "read_delta",
    "remove_leftovers",
    "set_table_properties",
    "stage_delta",
    "table_exists",
    "table_identity",
    "table_properties",
    "table_schema",
    "table_summary",
    "txn_version",
    "vacuum_orphans",
    "write_arrow",
    "write_delta",
]
