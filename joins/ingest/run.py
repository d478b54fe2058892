"""One ingest run of a source: landing files not taken yet -> the source's Delta tables.

- One run per source at a time: the run holds the source's writer lease (`joins.lake.Lease`)
  throughout, waiting for it at most `wait_s` (then WriterBusyError names the holder), and
  checks it before every commit; every commit is also guarded by the table version it was
  decided against, so a writer that lost the lease cannot land anything.
- Exactly once across crashes and retries, via the source's batch log (`log.py`: the runtime's
  `BatchLog`, plan before the batch reads anything, done after its last commit): a planned
  batch not done is re-run first, with its own files and batch id, before anything new is
  planned. A plan commit that another run made first stops the run.
- Leftovers of a crashed run are removed first (`joins.lake.remove_leftovers`).
- No file blocks the source: a file that cannot be read is quarantined whole and recorded in the
  batch log as taken; the rest of the batch goes on. A read that failed because the store did
  (a network error, a denied permission: `joins.landing.read_failures`) is no verdict on the
  file: the run stops with LandingReadError before committing, and the next run reads it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from joins.errors import ConfigError
from joins.ingest.catalog import resolved_source
from joins.ingest.delta_source import (
    batch_reader,
    landed_versions,
    up_to_metadata_change,
    version_of,
)
from joins.ingest.log import IngestLog, PlannedBatch, PlannedFile, pending_files
from joins.ingest.source import IngestSource, IngestSummary
from joins.ingest.stream import ingest_stream_batch
from joins.ingest.table import ingest_table_batch
from joins.landing.files import LandingFile, file_problems, scan_folder
from joins.landing.parquet import footer_problem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.lake import LeaseRecord


def list_landing(folder: str) -> list[str]:
    """File names in a landing folder, in arrival (name) order, refused entries (links,
    directories, ...) included: an ingest run quarantines them, so they are reported once."""
    return [f.name for f in scan_folder(folder)]


def ingest_in_progress(source: IngestSource) -> LeaseRecord | None:
    """The lease record of the ingest of `source` running now (None: none), from the lease's
    Delta log only (no Spark)."""
    import time

    from joins.lake import Lease

    _, record = Lease(source.lease, purpose="look-up").current()
    return record if record is not None and record.held_at(int(time.time() * 1000)) else None


def _plan_problem(entry: LandingFile | None, source: IngestSource) -> str | None:
    if entry is None:  # a Delta version: Delta's own reads judge it
        return None
    if entry.problem is not None:
        return entry.problem
    return footer_problem(entry.path) if source.spec.format == "parquet" else None


def run_ingest(spark: SparkSession, source: IngestSource, *, requested: Sequence[str] = (),
               wait_s: float = 0.0, on_wait: Callable[[LeaseRecord], None] | None = None,
               on_takeover: Callable[[LeaseRecord, str], None] | None = None
               ) -> list[IngestSummary]:
    """Ingest the requested landing files (all landed ones when none are named) that no batch has
    taken yet. Returns one summary per batch run (none: nothing new). WriterBusyError when
    another ingest of the source still holds the lease after `wait_s` seconds; a lease whose
    holder provably died (killed mid-ingest) is taken over at once, told to `on_takeover`."""
    from joins.lake import Lease, remove_leftovers, txn_version
    from joins.versioned.retention import check_history_retention

    lease = Lease(source.lease, purpose=f"ingest of {source.name}", ttl_s=source.lease_ttl_s,
                  on_takeover=on_takeover)
    delta = source.spec.format == "delta"
    with lease.held(wait_s=wait_s, on_wait=on_wait):
        if source.catalog_table is not None:
            assert source.catalog_record is not None
            source = resolved_source(spark, source, source.catalog_record, lease.check)
        entries: dict[str, LandingFile | None] = (
            dict.fromkeys(landed_versions(source.landing)) if delta
            else {f.name: f for f in scan_folder(source.landing)})
        missing = sorted(set(requested) - set(entries))
        if missing:
            raise ConfigError(f"{source.name}: config.files names file(s) not in the landing "
                              f"folder {source.landing}: {missing}")
        # The batch log is delta-rs's own small write: no Spark files to leave behind.
        remove_leftovers(spark, [source.quarantine, source.table],
                         writer=source.name, before_commit=lease.check)
        if source.history_retention_ms is not None:
            check_history_retention(source.table, source.history_retention_ms,
                                    before_commit=lease.check)
        log = IngestLog(source.manifest, source_id=source.name)
        log.migrate(committed=lambda: txn_version(source.table, source.name),
                    before_commit=lease.check)
        state = log.state()
        summaries: list[IngestSummary] = []
        if state.pending is not None:
            summaries.append(_ingest_batch(spark, source, state.pending, log, lease.check))
        todo = pending_files(sorted(entries), state.taken, list(requested))
        if delta and todo != pending_files(sorted(entries), state.taken, None)[:len(todo)]:
            raise ConfigError(f"{source.name}: a Delta table's versions are taken in order, "
                              f"without gaps; config.files names {todo}")
        next_id = state.next_id
        while todo:
            # A Delta table's versions go in batches that one read can take (each ends before a
            # metadata change); landing files all in one.
            taken = up_to_metadata_change(source.landing, todo) if delta else todo
            batch = PlannedBatch(next_id, tuple(PlannedFile(n, _plan_problem(entries[n], source))
                                                for n in taken))
            log.plan(batch, landing=source.landing, before_commit=lease.check,
                     version_range=(version_of(taken[0]), version_of(taken[-1])) if delta else None)
            summaries.append(_ingest_batch(spark, source, batch, log, lease.check))
            todo, next_id = todo[len(taken):], next_id + 1
        return summaries


def _ingest_batch(spark: SparkSession, source: IngestSource, batch: PlannedBatch, log: IngestLog,
                  before_commit: Callable[[], None]) -> IngestSummary:
    summary = _ingest_files(spark, source, batch, before_commit)
    log.done(batch.batch_id, dataclasses.asdict(summary), before_commit=before_commit)
    return summary


def _ingest_files(spark: SparkSession, source: IngestSource, batch: PlannedBatch,
                  before_commit: Callable[[], None]) -> IngestSummary:
    ingest = ingest_table_batch if source.kind == "table" else ingest_stream_batch
    if source.spec.format == "delta":
        label, read = batch_reader(spark, source, batch.names)
        return ingest(spark, source, [label], batch_id=batch.batch_id,
                      before_commit=before_commit, read=read)
    folder = source.landing.rstrip("/")
    readable: list[str] = []
    refused: list[tuple[str, str]] = []
    paths = {f"{folder}/{f.name}": f.problem for f in batch.files}
    # A planned file may have gone (or been swapped for a link) before a re-run of its batch.
    now = file_problems([path for path, problem in paths.items() if problem is None])
    for path, planned in paths.items():
        problem = planned or now[path]
        if problem is None:
            readable.append(path)
        else:
            refused.append((path, problem))
    return ingest(spark, source, readable, batch_id=batch.batch_id, refused=refused,
                  before_commit=before_commit)
