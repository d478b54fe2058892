"""Landing files -> the versioned table of a table source, one batch per call: the files read
(`joins.landing`), their changelog applied by the versioned table's ingest
(`joins.versioned.ingest`: the seed rules, expired puts and bad rows quarantined)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from joins.ingest.source import IngestSource, IngestSummary
from joins.ingest.stream import file_names
from joins.landing.reader import LandingBatch, read_landing
from joins.landing.spec import LandingSpec, require_spec
from joins.versioned.batches import IngestReport, recorded_batch_report
from joins.versioned.ingest import ingest_changelog
from joins.versioned.quarantine import batch_bad_files
from joins.versioned.spark_store import VersionedDeltaLayout
from joins.versioned.stream_time import DEFAULT_BLOCK_ROWS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def table_layout(spec: LandingSpec, history_retention_ms: int) -> VersionedDeltaLayout:
    """The versioned table's layout for changelogs read with `spec` (same key/value names)."""
    return VersionedDeltaLayout.parse({"key_columns": list(spec.key_names),
                                       "value_columns": list(spec.value_names),
                                       "history_retention_ms": history_retention_ms})


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


def ingest_landing(spark: SparkSession, files: str | Sequence[str], spec: LandingSpec | dict[str, Any],
                   *, versions_path: str, quarantine_path: str, source_id: str, batch_id: int,
                   history_retention_ms: int, block_rows: int = DEFAULT_BLOCK_ROWS,
                   refused: Sequence[tuple[str, str]] = (),
                   before_commit: Callable[[], None] | None = None,
                   read: Callable[[], LandingBatch] | None = None) -> IngestReport:
    """Read one batch of landing files and apply it to the versioned table.

    rows in (non-blank data rows of the files, plus one per file quarantined whole) = stored +
    expired + quarantined. With `on_bad_record: fail` a bad row raises LandingRecordError (a bad
    file LandingFileError) and nothing is written; with `quarantine` bad rows and files go to the
    quarantine table in the batch's quarantine commit. `refused` files (path, problem) are
    quarantined without being opened. A batch already committed is not read again: its recorded
    report comes back with `skipped`. `before_commit` runs before each commit. `read`, when
    given, reads the batch instead of the files (a Delta table's commits: read_delta_changes)."""
    spec = require_spec(spec)
    layout = table_layout(spec, history_retention_ms)
    recorded = recorded_batch_report(spark, versions_path=versions_path,
                                     quarantine_path=quarantine_path, source_id=source_id,
                                     batch_id=batch_id)
    if recorded is not None:
        return recorded
    batch = read() if read is not None else read_landing(spark, files, spec, refused=refused)
    try:
        bad = batch.bad_records if spec.on_bad_record == "quarantine" else None
        return ingest_changelog(spark, batch.changelog, layout, versions_path=versions_path,
                                quarantine_path=quarantine_path, source_id=source_id,
                                batch_id=batch_id, bad_records=bad, block_rows=block_rows,
                                before_commit=before_commit, rows_at_most=batch.rows_at_most)
    finally:
        batch.close()
