"""The quarantine table of an ingested source: one row per input record (or whole input file)
that was not stored, with the reason; and how a batch commits it.

A batch writes two tables: the quarantine first, then its main table (the versions of a
versioned table, the events of a stream), whose commit is the batch's commit point (it alone
carries the batch into stream time and into what joins read). So:

- readers count a batch's quarantine rows only once its main commit landed
  (`read_committed_quarantine`): a crash between the two commits shows nothing of the batch;
- the re-run of such a half-committed batch decides the batch again from its files. When that
  gives the rows already in the quarantine (the usual case: the same files), nothing is
  written; when it does not (a planned file was edited or removed since), the stale rows are
  replaced in one commit, so no row is counted twice or left over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from joins.versioned.spark_store import ARRIVAL, BATCH_ID, SOURCE_ID, TS, require_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from joins.lake import CommitInfo

# Optional provenance columns of a changelog (set by joins.landing), carried into quarantine.
SOURCE_FILE = "source_file"
SOURCE_ROW = "source_row"

# Quarantine kinds: a put older than stream time - retention, a bad input record, a whole input
# file that could not be read (its rows are unknown; it counts as one).
KIND_EXPIRED = "expired"
KIND_BAD_RECORD = "bad_record"
KIND_BAD_FILE = "bad_file"

# Columns a caller's bad-record frame provides (the rest are filled in by the ingest); an
# optional `kind` column marks whole-file rows (default: bad_record).
BAD_RECORD_COLUMNS: tuple[str, ...] = (ARRIVAL, "field", "reason", SOURCE_FILE, SOURCE_ROW, "record")


def quarantine_schema() -> StructType:
    """The quarantine table: one row per input record not stored, with the reason."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([
        StructField(SOURCE_ID, StringType(), False),
        StructField(BATCH_ID, LongType(), False),
        StructField(ARRIVAL, LongType(), True),
        StructField("kind", StringType(), False),
        StructField("field", StringType(), True),
        StructField("reason", StringType(), False),
        StructField(SOURCE_FILE, StringType(), True),
        StructField(SOURCE_ROW, LongType(), True),
        StructField(TS, LongType(), True),
        StructField("stream_time", LongType(), True),
        StructField("history_retention_ms", LongType(), True),
        StructField("record", StringType(), True),
    ])


def bad_record_quarantine_rows(bad: DataFrame, *, source_id: str, batch_id: int) -> DataFrame:
    """A caller's bad-record frame (columns BAD_RECORD_COLUMNS, optional `kind`) as quarantine
    rows."""
    from pyspark.sql import functions as F

    require_columns(bad, list(BAD_RECORD_COLUMNS), what="bad-record frame")
    kind = F.col("kind") if "kind" in bad.columns else F.lit(KIND_BAD_RECORD)
    return bad.select(
        F.lit(source_id).alias(SOURCE_ID),
        F.lit(batch_id).cast("long").alias(BATCH_ID),
        F.col(ARRIVAL).cast("long").alias(ARRIVAL),
        kind.cast("string").alias("kind"),
        F.col("field").cast("string").alias("field"),
        F.col("reason").cast("string").alias("reason"),
        F.col(SOURCE_FILE).cast("string").alias(SOURCE_FILE),
        F.col(SOURCE_ROW).cast("long").alias(SOURCE_ROW),
        F.lit(None).cast("long").alias(TS),
        F.lit(None).cast("long").alias("stream_time"),
        F.lit(None).cast("long").alias("history_retention_ms"),
        F.col("record").cast("string").alias("record"),
    )


def commit_quarantine(rows: Callable[[], DataFrame], path: str, *, source_id: str, batch_id: int,
                      count: int, before_commit: Callable[[], None] | None = None) -> CommitInfo | None:
    """Commit batch `batch_id`'s quarantine rows (`count` of them) before its commit point.
    Version-guarded: a concurrent writer makes it fail, never land twice. None: nothing to
    write. `rows` builds the frame only when something is written: most batches quarantine
    nothing, and a frame costs an analysis on the driver."""
    from joins.lake import AppTxn, delta_version, txn_version, write_delta

    version = delta_version(path)
    landed = None if version is None else txn_version(path, source_id)
    if landed is not None and landed >= batch_id:
        return _replace_batch(rows(), path, version=version, source_id=source_id, batch_id=batch_id,
                              before_commit=before_commit)
    if count == 0:
        return None
    if before_commit is not None:
        before_commit()
    return write_delta(rows(), path, mode="append", app_txn=AppTxn(source_id, batch_id),
                       expected_version=-1 if version is None else version,
                       commit_message=f"quarantine of batch {batch_id} from {source_id}")


def _replace_batch(rows: DataFrame, path: str, *, version: int | None, source_id: str,
                   batch_id: int, before_commit: Callable[[], None] | None) -> CommitInfo:
    from pyspark.sql import functions as F

    from joins.lake import CommitInfo, read_delta, write_delta

    assert version is not None
    table = read_delta(rows.sparkSession, path, version=version)
    mine = (F.col(SOURCE_ID) == source_id) & (F.col(BATCH_ID) == batch_id)
    columns = table.columns
    landed, fresh = table.where(mine).select(*columns), rows.select(*columns)
    if landed.exceptAll(fresh).isEmpty() and fresh.exceptAll(landed).isEmpty():
        return CommitInfo(version=None, skipped=True, files=0, rows=0)
    # Rare (a planned file changed between two attempts of its batch): the whole table is
    # rewritten, since a Delta commit can replace rows only by the files holding them.
    if before_commit is not None:
        before_commit()
    return write_delta(table.where(~mine).unionByName(fresh), path, mode="overwrite",
                       expected_version=version,
                       commit_message=f"quarantine of batch {batch_id} from {source_id}, decided "
                                      f"again (its files changed since the first attempt)")


def read_committed_quarantine(spark: SparkSession, path: str, *, table_path: str,
                              source_id: str) -> DataFrame | None:
    """The quarantine rows of `source_id` whose batch committed to its main table at
    `table_path` (rows of other sources are kept as they are); None: no quarantine table."""
    from pyspark.sql import functions as F

    from joins.lake import read_delta, table_exists, txn_version

    if not table_exists(path):
        return None
    committed = txn_version(table_path, source_id) if table_exists(table_path) else None
    table = read_delta(spark, path)
    if committed is None:
        return table.where(F.col(SOURCE_ID) != source_id)
    return table.where((F.col(SOURCE_ID) != source_id) | (F.col(BATCH_ID) <= committed))


def batch_quarantine_counts(spark: SparkSession, path: str, *, source_id: str,
                            batch_id: int) -> dict[str, int]:
    """{kind: rows} of one batch in the quarantine table (empty when there is no table)."""
    from pyspark.sql import functions as F

    from joins.lake import read_delta, table_exists

    if not table_exists(path):
        return {}
    q = read_delta(spark, path, columns=[SOURCE_ID, BATCH_ID, "kind"])
    q = q.where((F.col(SOURCE_ID) == source_id) & (F.col(BATCH_ID) == batch_id))
    return {r["kind"]: int(r["n"]) for r in q.groupBy("kind").agg(F.count("*").alias("n")).collect()}


def batch_bad_files(spark: SparkSession, path: str, *, source_id: str, batch_id: int) -> list[str]:
    """The files of one batch that were quarantined whole (a few rows at most)."""
    from pyspark.sql import functions as F

    from joins.lake import read_delta, table_exists

    if not table_exists(path):
        return []
    q = read_delta(spark, path, columns=[SOURCE_ID, BATCH_ID, "kind", SOURCE_FILE])
    rows = q.where((F.col(SOURCE_ID) == source_id) & (F.col(BATCH_ID) == batch_id)
                   & (F.col("kind") == KIND_BAD_FILE)).select(SOURCE_FILE).collect()
    return sorted(r[SOURCE_FILE] for r in rows)
