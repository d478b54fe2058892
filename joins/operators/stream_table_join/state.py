"""Where the incremental stream-table join keeps its state, and its write-ahead batch log.

Every table lives under one root (`JoinPaths`), each a Delta table:

- `output`: join results, partitioned by `event_date` (of the stream record);
- `quarantine`: late stream records under `late = quarantine`, with the reason;
- `buffer`: the grace buffer (stream records waiting for stream time to pass them by grace),
  rewritten whole by each batch;
- `unversioned_table`: the keyed state of an unversioned table (last arrival per key wins),
  an append-only log read as "largest arrival per key";
- `checkpoints`: the batch log, one `plan` row written BEFORE a batch computes anything and
  one `done` row written after its last commit.

The plan pins every input a batch reads: the stream and table Delta versions it consumes, the
Delta versions of the buffer and keyed state it starts from, and the stream times it starts
from. A re-run of a planned batch therefore reads exactly the same inputs (by Delta version,
never "latest"), decides exactly the same rows, and its writes are made idempotent by one
application transaction per table (app id below, version = batch id). See
docs/stream_table_incremental.md for the commit order and why a crash anywhere is harmless.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from joins.errors import JoinsError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Application ids of the idempotent commits (Delta `txn` actions), one per table and kind.
APP = "stream_table_join"
APP_PLAN = f"{APP}.plan"
APP_DONE = f"{APP}.done"
APP_OUTPUT = f"{APP}.output"
APP_QUARANTINE = f"{APP}.quarantine"
APP_BUFFER = f"{APP}.buffer"
APP_STATE = f"{APP}.unversioned_table"

PLAN, DONE = "plan", "done"
CHECKPOINT_SCHEMA = "batch_id long, kind string, payload string"

# The log is compacted into one file every this many batches, so reading it stays cheap.
COMPACT_EVERY = 50


class BatchStateError(JoinsError):
    """The join's tables are in a state the requested batch cannot follow (another batch is
    half committed, the batch id goes backwards, or the sources changed)."""


@dataclass(frozen=True)
class JoinPaths:
    """The Delta tables of one incremental stream-table join, all under `root`."""

    root: str

    def _sub(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    @property
    def output(self) -> str:
        return self._sub("output")

    @property
    def quarantine(self) -> str:
        return self._sub("quarantine")

    @property
    def buffer(self) -> str:
        return self._sub("buffer")

    @property
    def unversioned_table(self) -> str:
        return self._sub("unversioned_table")

    @property
    def checkpoints(self) -> str:
        return self._sub("checkpoints")


@dataclass(frozen=True)
class VersionRange:
    """Delta versions [first, last] of a source a batch consumes; empty when first > last."""

    first: int
    last: int

    @property
    def empty(self) -> bool:
        return self.first > self.last


@dataclass(frozen=True)
class BatchPlan:
    """Everything a batch reads, pinned before it computes anything (the write-ahead record)."""

    batch_id: int
    stream_source: str
    table_source: str
    # Source Delta versions consumed by this batch (from the last done batch's `last` + 1).
    stream: VersionRange
    table: VersionRange
    # Delta versions of the join's own state the batch starts from (None: table not created yet).
    buffer_version: int | None
    state_version: int | None
    # The buffer's stream time and the versioned table's stream time before the batch.
    stream_time_before: int | None
    table_stream_time_before: int | None
    # Records in the buffer at buffer_version (a batch reports how many stay buffered).
    buffered_before: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BatchPlan:
        raw = json.loads(text)
        return cls(**{**raw, "stream": VersionRange(**raw["stream"]),
                      "table": VersionRange(**raw["table"])})


@dataclass(frozen=True)
class BatchDone:
    """What a completed batch leaves for the next one, and its report (as plain JSON)."""

    batch_id: int
    stream_source: str
    table_source: str
    stream_last: int          # last stream Delta version consumed
    table_last: int           # last table Delta version consumed (the pinned one)
    stream_time_after: int | None
    table_stream_time_after: int | None
    report: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> BatchDone:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class LogState:
    """The tail of the batch log: the last completed batch and a planned one not yet done."""

    last_done: BatchDone | None
    pending: BatchPlan | None


class CheckpointLog:
    """The write-ahead batch log in the `checkpoints` Delta table."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark = spark
        self.path = path

    def state(self) -> LogState:
        from pyspark.sql import functions as F

        from joins.lake import read_delta, table_exists, txn_version

        if not table_exists(self.path):
            return LogState(None, None)
        planned = txn_version(self.path, APP_PLAN)
        done = txn_version(self.path, APP_DONE)
        wanted = [v for v in (planned, done) if v is not None]
        if not wanted:
            return LogState(None, None)
        # The log is metadata (two tiny rows per batch); only the two rows needed are read.
        rows = (read_delta(self.spark, self.path)
                .where(F.col("batch_id").isin(wanted)).collect())
        by_kind = {(int(r["batch_id"]), r["kind"]): r["payload"] for r in rows}
        last_done = None if done is None else BatchDone.from_json(by_kind[(done, DONE)])
        pending = None
        if planned is not None and (done is None or planned > done):
            pending = BatchPlan.from_json(by_kind[(planned, PLAN)])
        return LogState(last_done, pending)

    def done_record(self, batch_id: int) -> BatchDone | None:
        from pyspark.sql import functions as F

        from joins.lake import read_delta, table_exists

        if not table_exists(self.path):
            return None
        rows = (read_delta(self.spark, self.path)
                .where((F.col("batch_id") == batch_id) & (F.col("kind") == DONE)).collect())
        return BatchDone.from_json(rows[0]["payload"]) if rows else None

    def write_plan(self, plan: BatchPlan) -> None:
        self._append(plan.batch_id, PLAN, plan.to_json(), APP_PLAN)

    def write_done(self, done: BatchDone) -> int | None:
        version = self._append(done.batch_id, DONE, done.to_json(), APP_DONE)
        if done.batch_id % COMPACT_EVERY == COMPACT_EVERY - 1:
            self.compact()
        return version

    def _append(self, batch_id: int, kind: str, payload: str, app_id: str) -> int | None:
        from joins.lake import AppTxn, write_delta

        df = self.spark.createDataFrame([(batch_id, kind, payload)], CHECKPOINT_SCHEMA)
        info = write_delta(df, self.path, mode="append", app_txn=AppTxn(app_id, batch_id),
                           commit_message=f"{APP}: {kind} batch {batch_id}")
        return None if info.skipped else info.version

    def compact(self) -> None:
        """Rewrite the log into one file (rows unchanged; the transactions stay in the log)."""
        from joins.lake import read_delta, write_delta

        rows = read_delta(self.spark, self.path).coalesce(1)
        write_delta(rows, self.path, mode="overwrite", commit_message=f"{APP}: compact batch log")


def check_progress(done: BatchDone, *, stream_last: int, table_last: int, root: str) -> None:
    """Source versions never go backwards: a source older than what the join already consumed
    is another table (recreated, or the wrong path), and its versions mean nothing here. (Paths
    are not compared: a lake copied or mounted elsewhere is still the same lake.)"""
    if stream_last < done.stream_last or table_last < done.table_last:
        raise BatchStateError(
            f"{APP}: the join under {root} consumed the stream source up to version "
            f"{done.stream_last} and the table source up to version {done.table_last}, but the "
            f"sources are now at versions {stream_last} and {table_last}: they are not the tables "
            f"this join read (use a new root for new sources)")
