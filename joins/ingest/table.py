"""Landing files -> the versioned table of a table source, one batch per call (the seed rules,
expired puts and bad rows quarantined: `joins.landing.ingest_landing`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from joins.ingest.source import IngestSource, IngestSummary
from joins.ingest.stream import file_names
from joins.landing import ingest_landing
from joins.landing.reader import LandingBatch
from joins.versioned.quarantine import batch_bad_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def ingest_table_batch(spark: SparkSession, source: IngestSource, files: Sequence[str], *,
                       batch_id: int, refused: Sequence[tuple[str, str]] = (),
                       before_commit: Callable[[], None] | None = None,
                       read: Callable[[], LandingBatch] | None = None) -> IngestSummary:
    """Ingest batch `batch_id` (`files` read, `refused` quarantined whole) into the versioned
    table; a batch already committed is reported from the tables, nothing written."""
    from joins.lake import delta_version

    assert source.history_retention_ms is not None
    report = ingest_landing(spark, list(files), source.spec, versions_path=source.table,
                            quarantine_path=source.quarantine, source_id=source.name,
                            batch_id=batch_id, history_retention_ms=source.history_retention_ms,
                            refused=refused, before_commit=before_commit, read=read)
    bad = batch_bad_files(spark, source.quarantine, source_id=source.name, batch_id=batch_id)
    return IngestSummary(
        source=source.name, batch_id=batch_id, files=file_names(sorted([*files, *(p for p, _ in refused)])),
        rows_in=report.rows_in, stored=report.stored, expired=report.expired,
        quarantined=report.quarantined, bad_files=file_names(bad),
        stream_time=report.stream_time_after, delta_version=delta_version(source.table),
        skipped=report.skipped)
