"""Which landing files went into which ingest batch: the source's batch log.

The ingest keeps the runtime's bookkeeping (`joins.incremental.log.BatchLog`, under the
source's lease), not one of its own: a batch's plan (its files, each with the reason it is
quarantined whole, if it is) is committed *before* the batch reads anything, and its done row
after the batch's last commit. The ingest commits carry the batch id as their application
transaction. So after a crash anywhere:

- a plan without a done row is re-run first, with exactly its files and its batch id (a commit
  of it that had landed is skipped by its application transaction, one that had not is made);
- then new files are planned as the next batch.

Whether a file is read or quarantined whole (a symbolic link, not a regular file, a Parquet
file whose footer does not read) is decided once, at planning, so a re-run decides it the same
way. A file name is taken once: a corrected copy of a quarantined file lands under a new name.

A source ingested before this format has a manifest of one row per file (`batch_id, file,
status, reason`, app id `<source>.manifest`) at the same path: it is read as it is, and
rewritten into the batch log (one commit) before the next plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from joins import lake
from joins.incremental.log import (
    COMPACT_EVERY,
    PLAN,
    SCHEMA,
    BatchDone,
    BatchLog,
    BatchPlan,
    VersionRange,
)
from joins.versioned.batches import IngestStateError

LANDING = "landing"


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


@dataclass(frozen=True)
class IngestState:
    """What the log says before a run plans: a batch to finish first (planned, not done), the
    next batch id, and every file a batch took (`quarantined`: those taken as bad files)."""

    pending: PlannedBatch | None
    next_id: int
    taken: frozenset[str]
    quarantined: frozenset[str]


def _batch(plan: BatchPlan) -> PlannedBatch:
    return PlannedBatch(plan.batch_id, tuple(PlannedFile(n, p) for n, p in plan.carry["files"]))


class IngestLog:
    """The batch log of source `source_id` at `path` (app ids `<source>.plan` / `.done`)."""

    def __init__(self, path: str, *, source_id: str) -> None:
        self.path = path
        self.source_id = source_id
        self.log = BatchLog(path, source_id)

    def state(self) -> IngestState:
        """From one read of the log's metadata (delta-rs, no Spark job). An old-format manifest
        is read as it is, with no pending batch: a run rewrites it (`migrate`) before this."""
        small = lake.open_small(self.path)
        if small is None:
            return IngestState(None, 0, frozenset(), frozenset())
        legacy = _legacy_batches(small)
        if legacy is not None:
            batches, pending = legacy, None
            last = batches[-1].batch_id if batches else None
        else:
            batches = [_batch(p) for p in self.log.plans(small)]
            last, done = small.txn_version(self.log.plan_app), small.txn_version(self.log.done_app)
            unfinished = last is not None and (done is None or last > done)
            pending = next((b for b in batches if b.batch_id == last), None) if unfinished else None
        files = [f for b in batches for f in b.files]
        return IngestState(pending=pending, next_id=0 if last is None else last + 1,
                           taken=frozenset(f.name for f in files),
                           quarantined=frozenset(f.name for f in files if f.problem is not None))

    def migrate(self, *, committed: Callable[[], int | None],
                before_commit: Callable[[], None] | None = None) -> None:
        """Rewrite a manifest of the old format into the batch log (nothing else changes):
        every batch planned, and done up to `committed()`, the last batch id the source's table
        committed. One guarded commit: a crash before it leaves the old manifest as it was."""
        small = lake.open_small(self.path)
        legacy = None if small is None else _legacy_batches(small)
        if small is None or legacy is None:
            return
        last_committed = committed()
        plans = [self._plan(b, None) for b in legacy]
        rows = [(p.batch_id, PLAN, p.to_json()) for p in plans]
        if before_commit is not None:
            before_commit()
        lake.write_arrow(pa.table({"batch_id": [r[0] for r in rows], "kind": [r[1] for r in rows],
                                   "payload": [r[2] for r in rows]}, schema=SCHEMA),
                         self.path, mode="overwrite", new_schema=True,
                         app_txn=None if not plans else lake.AppTxn(self.log.plan_app,
                                                                    plans[-1].batch_id),
                         expected_version=small.table.version(),
                         commit_message=f"{self.source_id}: ingest manifest rewritten as a batch log")
        done = max((p.batch_id for p in plans
                    if last_committed is not None and p.batch_id <= last_committed), default=None)
        if done is not None:
            self.done(done, {"migrated": True}, before_commit=before_commit)

    def plan(self, batch: PlannedBatch, *, version_range: tuple[int, int] | None = None,
             landing: str | None = None, before_commit: Callable[[], None] | None = None) -> None:
        """Record the batch's files; IngestStateError when another run planned this batch id
        meanwhile (this run must then not ingest anything: the batch is the other run's)."""
        if before_commit is not None:
            before_commit()
        plan = self._plan(batch, landing, version_range)
        if not self.log.write_plan(plan):
            raise IngestStateError(
                f"{self.source_id}: batch {batch.batch_id} was planned by another ingest run "
                f"meanwhile; this run stops without ingesting anything")

    def done(self, batch_id: int, report: dict[str, object], *,
             before_commit: Callable[[], None] | None = None) -> None:
        if before_commit is not None:
            before_commit()
        self.log.write_done(BatchDone(batch_id, {}, {}, report=report))
        # Two small files a batch: rewritten into one now and then, as a join's log is, so that
        # reading the log (every run, every sensor tick) stays cheap.
        if batch_id % COMPACT_EVERY == COMPACT_EVERY - 1:
            self.log.compact()

    def _plan(self, batch: PlannedBatch, landing: str | None,
              version_range: tuple[int, int] | None = None) -> BatchPlan:
        ranges = {} if version_range is None else {LANDING: VersionRange(*version_range)}
        return BatchPlan(batch.batch_id, sources={} if landing is None else {LANDING: landing},
                         ranges=ranges, state_versions={},
                         carry={"files": [[f.name, f.problem] for f in batch.files]})


def _legacy_app(source_id: str) -> str:
    return f"{source_id}.manifest"


def _legacy_batches(small: lake.SmallTable) -> list[PlannedBatch] | None:
    """The batches of a manifest of the old format (None: the table is a batch log)."""
    if "file" not in {f.name for f in small.table.schema().fields}:
        return None   # told by the schema alone: a batch log's rows are not read twice a run
    rows = small.read()
    status = (rows.column("status").to_pylist() if "status" in rows.column_names
              else ["ingest"] * rows.num_rows)
    reason = (rows.column("reason").to_pylist() if "reason" in rows.column_names
              else [None] * rows.num_rows)
    by_id: dict[int, list[PlannedFile]] = {}
    for b, f, s, r in zip(rows.column("batch_id").to_pylist(), rows.column("file").to_pylist(),
                          status, reason, strict=True):
        by_id.setdefault(int(b), []).append(PlannedFile(str(f), r if s == "quarantined" else None))
    return [PlannedBatch(b, tuple(sorted(fs, key=lambda f: f.name))) for b, fs in sorted(by_id.items())]


def pending_files(landed: Sequence[str], planned: set[str] | frozenset[str],
                  requested: Sequence[str] | None) -> list[str]:
    """The files a run ingests: the requested ones (all landed ones when none are named) that no
    batch has taken yet, in arrival (name) order. Requested files that are not landed are an
    error of the caller, reported by the run."""
    wanted = landed if not requested else [f for f in landed if f in set(requested)]
    return [f for f in sorted(wanted) if f not in planned]
