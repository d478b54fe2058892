"""Which landing files went into which ingest batch: a write-ahead manifest per source.

A batch's files are recorded (one idempotent Delta commit, app transaction = batch id) *before*
the batch is ingested, and the ingest commits carry the same batch id. So after a crash anywhere:

- the manifest holds batch N but the table does not: the next run re-ingests exactly batch N's
  files under batch id N (never a different file set under an id already used);
- the table holds batch N too: batch N is done, and the next batch is N + 1.

A file is ingested once, whichever sensor tick, retry or manual materialization asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from assets import engine

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = "batch_id long, file string"


@dataclass(frozen=True)
class PlannedBatch:
    batch_id: int
    files: tuple[str, ...]


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
        last_id = engine.txn_version(self.path, self.app_id)
        if last_id is None:
            return None, set()
        rows = engine.read_table(self.spark, self.path).collect()
        last = tuple(sorted(r["file"] for r in rows if r["batch_id"] == last_id))
        return PlannedBatch(last_id, last), {r["file"] for r in rows}

    def plan(self, batch_id: int, files: list[str]) -> None:
        df = self.spark.createDataFrame([(batch_id, f) for f in files], SCHEMA)
        engine.append_rows(df, self.path, app_id=self.app_id, version=batch_id,
                           message=f"{self.source_id}: plan of ingest batch {batch_id}")


def pending_files(landed: list[str], planned: set[str], requested: list[str] | None) -> list[str]:
    """The files a run ingests: the requested ones (all landed ones when none are named) that no
    batch has taken yet, in arrival (name) order. Requested files that are not landed are an
    error of the caller, reported by the asset."""
    wanted = landed if not requested else [f for f in landed if f in set(requested)]
    return [f for f in sorted(wanted) if f not in planned]
