"""The write-ahead batch log of an incremental join (`<root>/checkpoints`, a Delta table).

One `plan` row is committed BEFORE a batch computes anything: it pins every input the batch
reads (the Delta versions of each input it consumes, the versions of the join's state tables
it starts from, and the small values carried from the previous batch). One `done` row is
committed after the batch's last commit. A plan without a done row is a batch that must be
re-run, from exactly its plan, before anything else happens.

The rows are metadata (two per batch), written and read through delta-rs without Spark: a
micro-batch is a user waiting. Each row carries an application transaction (`<app>.plan` /
`<app>.done`, version = batch id), so writing a row twice is a no-op.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from joins import lake
from joins.errors import JoinsError

PLAN, DONE = "plan", "done"
SCHEMA = pa.schema([("batch_id", pa.int64()), ("kind", pa.string()), ("payload", pa.string())])

# The log is rewritten into one file every this many batches, so that reading it stays cheap.
COMPACT_EVERY = 50


class BatchStateError(JoinsError):
    """The join's tables are in a state the requested batch cannot follow (another batch is
    half committed, the batch id goes backwards, or the sources changed)."""


@dataclass(frozen=True)
class VersionRange:
    """Delta versions [first, last] of an input a batch consumes; empty when first > last."""

    first: int
    last: int

    @property
    def empty(self) -> bool:
        return self.first > self.last


@dataclass(frozen=True)
class BatchPlan:
    """Everything a batch reads, pinned before it computes anything."""

    batch_id: int
    sources: dict[str, str]                 # input role -> Delta table path
    ranges: dict[str, VersionRange]         # input role -> versions consumed
    state_versions: dict[str, int | None]   # state table -> version it starts from (None: none)
    carry: dict[str, Any] = field(default_factory=dict)  # small values from the last batch

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BatchPlan:
        raw = json.loads(text)
        ranges = {k: VersionRange(**v) for k, v in raw["ranges"].items()}
        return cls(**{**raw, "ranges": ranges})


@dataclass(frozen=True)
class BatchDone:
    """What a completed batch leaves for the next one, and its report (plain JSON)."""

    batch_id: int
    sources: dict[str, str]
    consumed: dict[str, int]                # input role -> last version consumed
    carry: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> BatchDone:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class LogTail:
    """The last completed batch and a planned one not yet done."""

    last_done: BatchDone | None
    pending: BatchPlan | None


class BatchLog:
    """The batch log at `path`, whose rows commit under app ids `<app>.plan` / `<app>.done`."""

    def __init__(self, path: str, app: str) -> None:
        self.path = path
        self.app = app

    @property
    def plan_app(self) -> str:
        return f"{self.app}.plan"

    @property
    def done_app(self) -> str:
        return f"{self.app}.done"

    def _rows(self, batch_ids: list[int], small: lake.SmallTable | None = None,
              ) -> dict[tuple[int, str], str]:
        small = small or lake.open_small(self.path)
        if small is None:
            return {}
        table = small.read([("batch_id", "in", batch_ids)])
        return {(int(b), str(k)): str(p) for b, k, p in zip(
            table.column("batch_id").to_pylist(), table.column("kind").to_pylist(),
            table.column("payload").to_pylist(), strict=True)}

    def tail(self) -> LogTail:
        # One version of the log answers all three questions (and one open costs less).
        small = lake.open_small(self.path)
        if small is None:
            return LogTail(None, None)
        planned, done = small.txn_version(self.plan_app), small.txn_version(self.done_app)
        wanted = [v for v in (planned, done) if v is not None]
        if not wanted:
            return LogTail(None, None)
        rows = self._rows(sorted(set(wanted)), small)
        last_done = None if done is None else BatchDone.from_json(rows[(done, DONE)])
        pending = None
        if planned is not None and (done is None or planned > done):
            pending = BatchPlan.from_json(rows[(planned, PLAN)])
        return LogTail(last_done, pending)

    def done_record(self, batch_id: int) -> BatchDone | None:
        payload = self._rows([batch_id]).get((batch_id, DONE))
        return None if payload is None else BatchDone.from_json(payload)

    def plan_record(self, batch_id: int) -> BatchPlan | None:
        payload = self._rows([batch_id]).get((batch_id, PLAN))
        return None if payload is None else BatchPlan.from_json(payload)

    def plans(self, small: lake.SmallTable | None = None) -> list[BatchPlan]:
        """Every batch's plan, in batch order (metadata: one row per batch); from `small`, a
        version of the log already open, when given."""
        small = small or lake.open_small(self.path)
        if small is None:
            return []
        table = small.read([("kind", "=", PLAN)])
        return sorted((BatchPlan.from_json(str(p)) for p in table.column("payload").to_pylist()),
                      key=lambda p: p.batch_id)

    def write_plan(self, plan: BatchPlan) -> bool:
        """Commit the plan; False if a plan of this batch id was already committed."""
        return self._append(plan.batch_id, PLAN, plan.to_json(), self.plan_app) is not None

    def write_done(self, done: BatchDone) -> int | None:
        return self._append(done.batch_id, DONE, done.to_json(), self.done_app)

    def _append(self, batch_id: int, kind: str, payload: str, app_id: str) -> int | None:
        rows = pa.table({"batch_id": [batch_id], "kind": [kind], "payload": [payload]},
                        schema=SCHEMA)
        info = lake.write_delta(rows, self.path, mode="append",
                                app_txn=lake.AppTxn(app_id, batch_id),
                                commit_message=f"{self.app}: {kind} batch {batch_id}")
        return None if info.skipped else info.version

    def compact(self) -> None:
        """Rewrite the log into one file (rows unchanged; the app transactions stay in the
        Delta log). Version-guarded: a row committed meanwhile is never overwritten away."""
        version = lake.delta_version(self.path)
        rows = lake.read_arrow(self.path, version=version)
        if version is None or rows is None:
            return
        # Another commit landing meanwhile only postpones the compaction (an optimisation).
        with contextlib.suppress(lake.ConcurrentCommitError):
            lake.write_arrow(rows.cast(SCHEMA), self.path, mode="overwrite",
                             commit_message=f"{self.app}: compact batch log",
                             expected_version=version)
