"""The state of a source's batches in a versioned table: what a committed batch did (read back
from the tables), and which batch may come next."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.errors import JoinsError
from joins.versioned.quarantine import (
    KIND_BAD_FILE,
    KIND_BAD_RECORD,
    KIND_EXPIRED,
    batch_quarantine_counts,
)
from joins.versioned.spark_store import BATCH_ID, OPERATOR, SOURCE_ID, read_stream_time

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.lake import CommitInfo


class IngestStateError(JoinsError):
    """The tables are in a state the requested batch cannot follow (an earlier batch is half
    committed, or the batch id goes backwards)."""


@dataclass(frozen=True)
class IngestReport:
    """What one batch did. rows_in == stored + expired + quarantined always holds for a batch
    decided by this call; for a `skipped` batch (already committed) the counts are read back from
    the tables (a compaction since may have removed some of its versions) and both stream times
    are the table's current one.

    `quarantined` counts bad input records (joins.landing), `expired` the puts older than stream
    time - history retention; both kinds are rows of the quarantine table."""

    source_id: str
    batch_id: int
    rows_in: int
    stored: int
    expired: int
    quarantined: int
    stream_time_before: int | None
    stream_time_after: int | None
    skipped: bool
    versions_commit: CommitInfo | None
    quarantine_commit: CommitInfo | None

    @property
    def versions_version(self) -> int | None:
        return None if self.versions_commit is None else self.versions_commit.version

    @property
    def quarantine_version(self) -> int | None:
        return None if self.quarantine_commit is None else self.quarantine_commit.version


# ---- pure DataFrame steps -------------------------------------------------------------------


def _committed_batch(path: str, source_id: str) -> int | None:
    from joins.lake import txn_version

    return txn_version(path, source_id)


def recorded_batch_report(spark: SparkSession, *, versions_path: str, quarantine_path: str,
                          source_id: str, batch_id: int) -> IngestReport | None:
    """The report of batch `batch_id` if its versions commit already landed (the batch is then
    complete and must not be written again), read back from the tables; else None."""
    from pyspark.sql import functions as F

    from joins.lake import read_delta

    committed = _committed_batch(versions_path, source_id)
    if committed is None or batch_id > committed:
        return None
    stream_time = read_stream_time(spark, versions_path)
    versions = read_delta(spark, versions_path, columns=[SOURCE_ID, BATCH_ID])
    stored = versions.where((F.col(SOURCE_ID) == source_id) & (F.col(BATCH_ID) == batch_id)).count()
    counts = batch_quarantine_counts(spark, quarantine_path, source_id=source_id, batch_id=batch_id)
    expired = counts.get(KIND_EXPIRED, 0)
    bad = counts.get(KIND_BAD_RECORD, 0) + counts.get(KIND_BAD_FILE, 0)
    return IngestReport(source_id=source_id, batch_id=batch_id, rows_in=stored + expired + bad,
                        stored=stored, expired=expired, quarantined=bad,
                        stream_time_before=stream_time, stream_time_after=stream_time, skipped=True,
                        versions_commit=None, quarantine_commit=None)


def check_batch_order(*, main_path: str, quarantine_path: str, source_id: str, batch_id: int) -> None:
    """Refuse a batch while another one is half committed (quarantine landed, main commit not):
    that batch must be completed first, with its own files."""
    committed = _committed_batch(main_path, source_id)
    quarantined_batch = _committed_batch(quarantine_path, source_id)
    if quarantined_batch is not None and quarantined_batch > (committed if committed is not None else -1) \
            and quarantined_batch != batch_id:
        raise IngestStateError(
            f"{OPERATOR}: batch {quarantined_batch} of source {source_id!r} is half committed (its "
            f"quarantine rows are in {quarantine_path}, its main commit is not in {main_path}); "
            f"re-run batch {quarantined_batch} before batch {batch_id}")
