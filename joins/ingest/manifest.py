"""Which landing files went into which ingest batch: a write-ahead manifest per source.

A batch's files are recorded (one idempotent, version-guarded Delta commit, app transaction =
batch id) *before* the batch is ingested, and the ingest commits carry the same batch id. So
after a crash anywhere:

- the manifest holds batch N but the table does not: the next run re-ingests exactly batch N's
  files under batch id N (never a different file set under an id already used);
- the table holds batch N too: batch N is done, and the next batch is N + 1.

Each file's row says whether it is read (`status` ingest) or quarantined whole (`quarantined`,
with the reason: a symbolic link, not a regular file, a Parquet file whose footer does not
read), decided once, at planning, so a re-run decides it the same way. A file name is taken
once: a corrected copy of a quarantined file must land under a new name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.versioned.batches import IngestStateError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = "batch_id long, file string, status string, reason string"
INGEST, QUARANTINED = "ingest", "quarantined"


@dataclass(frozen=True)
class PlannedFile:
    name: str
    problem: str | None = None   # set: the file is quarantined whole, not read


@dataclass(frozen=True)
class PlannedBatch:
    batch_id: int
    files: tuple[PlannedFile, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.files)


class IngestManifest:
    """The manifest Delta table of one source (`path`), whose batches the source's table commits
    under app id `source_id`."""

    def __init__(self, spark: SparkSession, path: str, *, source_id: str) -> None:
        self.spark = spark
        self.path = path
        self.source_id = source_id

    @property
    def app_id(self) -> str:
        return f"{self.source_id}.manifest"

    def state(self) -> tuple[PlannedBatch | None, set[str]]:
        """(the last planned batch, every file planned so far), from one read of the manifest
        (metadata: one row per landed file)."""
        from joins.lake import read_delta, table_exists, txn_version

        last_id = txn_version(self.path, self.app_id) if table_exists(self.path) else None
        if last_id is None:
            return None, set()
        rows = [r.asDict() for r in read_delta(self.spark, self.path).collect()]
        # A manifest written before file statuses existed has only (batch_id, file).
        last = tuple(sorted((PlannedFile(r["file"], r.get("reason") if r.get("status") == QUARANTINED
                                         else None) for r in rows if r["batch_id"] == last_id),
                            key=lambda f: f.name))
        return PlannedBatch(last_id, last), {r["file"] for r in rows}

    def plan(self, batch: PlannedBatch, *, before_commit: Callable[[], None] | None = None) -> None:
        """Record the batch's files; IngestStateError when another run planned this batch id
        meanwhile (this run must then not ingest anything: the batch is the other run's)."""
        from joins.lake import AppTxn, delta_version, table_schema, write_delta

        rows = [(batch.batch_id, f.name, INGEST if f.problem is None else QUARANTINED, f.problem)
                for f in batch.files]
        df = self.spark.createDataFrame(rows, SCHEMA)
        version = delta_version(self.path)
        # An older manifest lacks the status columns: a guarded commit cannot add them, so that
        # one commit goes unguarded (the source's lease keeps other writers away).
        old = version is not None and "status" not in table_schema(self.path).names
        if before_commit is not None:
            before_commit()
        info = write_delta(df, self.path, mode="append", schema_mode="merge" if old else "enforce",
                           app_txn=AppTxn(self.app_id, batch.batch_id),
                           expected_version=None if old else -1 if version is None else version,
                           commit_message=f"{self.source_id}: plan of ingest batch {batch.batch_id}")
        if info.skipped:
            raise IngestStateError(
                f"{self.source_id}: batch {batch.batch_id} was planned by another ingest run "
                f"meanwhile; this run stops without ingesting anything")


def pending_files(landed: Sequence[str], planned: set[str], requested: Sequence[str] | None) -> list[str]:
    """The files a run ingests: the requested ones (all landed ones when none are named) that no
    batch has taken yet, in arrival (name) order. Requested files that are not landed are an
    error of the caller, reported by the run."""
    wanted = landed if not requested else [f for f in landed if f in set(requested)]
    return [f for f in sorted(wanted) if f not in planned]
