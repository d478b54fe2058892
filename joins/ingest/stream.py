"""Landing files -> the append-only stream events table of a source, one batch per call.

Events: the key and value columns, `ts`, (a changelog source: `tombstone`), `event_date`
(partition), `_seq` (arrival order across
batches: batch id and arrival in the batch packed in one long, so a re-run of a batch assigns
exactly the same numbers), `source_id`, `batch_id`, `source_file`, `source_row`. Bad rows and
files go to the quarantine table (the versioned table's layout) or refuse the batch, per
`on_bad_record`. Commits as the versioned table's (`joins.versioned.quarantine`):
quarantine first, the events commit last as the batch's commit point, both guarded by the
version they were decided against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from joins.ingest.source import IngestSource, IngestSummary
from joins.landing import read_landing
from joins.landing.reader import LandingBatch
from joins.spark.exprs import event_date
from joins.versioned.batches import check_batch_order
from joins.versioned.quarantine import (
    bad_record_quarantine_rows,
    batch_bad_files,
    batch_quarantine_counts,
    commit_quarantine,
)
from joins.versioned.spark_store import BATCH_ID, SOURCE_ID

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEQ = "_seq"
SEQ_BATCH_SHIFT = 32


def file_names(files: Sequence[str]) -> tuple[str, ...]:
    import os

    return tuple(os.path.basename(f) for f in files)


def ingest_stream_batch(spark: SparkSession, source: IngestSource, files: Sequence[str], *,
                        batch_id: int, refused: Sequence[tuple[str, str]] = (),
                        before_commit: Callable[[], None] | None = None,
                        read: Callable[[], LandingBatch] | None = None) -> IngestSummary:
    """Ingest batch `batch_id` (`files` read, `refused` quarantined whole; or what `read`
    reads) into the events table; a batch already committed is reported from the tables,
    nothing written."""
    from pyspark.sql import functions as F

    from joins.lake import AppTxn, delta_version, txn_version, write_delta

    all_files = sorted([*files, *(p for p, _ in refused)])
    committed = txn_version(source.table, source.name)
    if committed is not None and batch_id <= committed:
        return recorded_stream_batch(spark, source, all_files, batch_id=batch_id)
    check_batch_order(main_path=source.table, quarantine_path=source.quarantine,
                      source_id=source.name, batch_id=batch_id)
    version = delta_version(source.table)
    batch = read() if read is not None else read_landing(spark, list(files), source.spec,
                                                          refused=refused)
    try:
        events = batch.changelog.select(
            *source.spec.key_names, *source.spec.value_names,
            F.col("ts").cast("long").alias("ts"),
            *(["tombstone"] if source.kind == "changelog" else []),
            event_date(F.col("ts")).alias("event_date"),
            (F.lit(batch_id).cast("long") * F.lit(1 << SEQ_BATCH_SHIFT) + F.col("arrival")).alias(SEQ),
            F.lit(source.name).alias(SOURCE_ID),
            F.lit(batch_id).cast("long").alias(BATCH_ID),
            "source_file", "source_row",
        ).persist()
        bad = bad_record_quarantine_rows(batch.bad_records, source_id=source.name,
                                         batch_id=batch_id).persist()
        try:
            stats = events.agg(F.count(F.lit(1)).alias("n"), F.max("ts").alias("max_ts")).first()
            stored = int(stats["n"]) if stats else 0
            max_ts = stats["max_ts"] if stats else None
            quarantined = bad.count()
            commit_quarantine(lambda: bad, source.quarantine, source_id=source.name, batch_id=batch_id,
                              count=quarantined, before_commit=before_commit)
            if before_commit is not None:
                before_commit()
            info = write_delta(events, source.table, mode="append", partition_by=["event_date"],
                               app_txn=AppTxn(source.name, batch_id),
                               expected_version=-1 if version is None else version,
                               commit_message=f"events of batch {batch_id} from {source.name}")
        finally:
            events.unpersist()
            bad.unpersist()
    finally:
        batch.close()
    return IngestSummary(source=source.name, batch_id=batch_id, files=file_names(all_files),
                         rows_in=stored + quarantined, stored=stored, expired=0,
                         quarantined=quarantined, bad_files=file_names([p for p, _ in batch.bad_files]),
                         stream_time=None if max_ts is None else int(max_ts),
                         delta_version=info.version if info.version is not None
                         else delta_version(source.table), skipped=info.skipped)


def recorded_stream_batch(spark: SparkSession, source: IngestSource, files: Sequence[str], *,
                          batch_id: int) -> IngestSummary:
    """The summary of a committed batch, read back from the tables."""
    from pyspark.sql import functions as F

    from joins.lake import delta_version, read_delta

    events = read_delta(spark, source.table, columns=["batch_id", "ts"])
    row = events.where(F.col("batch_id") == batch_id).agg(F.count("*"), F.max("ts")).first()
    stored = int(row[0]) if row else 0
    counts = batch_quarantine_counts(spark, source.quarantine, source_id=source.name,
                                     batch_id=batch_id)
    quarantined = sum(counts.values())
    return IngestSummary(source=source.name, batch_id=batch_id, files=file_names(files),
                         rows_in=stored + quarantined, stored=stored, expired=0,
                         quarantined=quarantined,
                         bad_files=file_names(batch_bad_files(spark, source.quarantine,
                                                          source_id=source.name, batch_id=batch_id)),
                         stream_time=None if not row or row[1] is None else int(row[1]),
                         delta_version=delta_version(source.table), skipped=True)
