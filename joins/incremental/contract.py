"""What an operator gives the incremental runtime, and what the runtime gives back.

An operator provides (see docs/architecture.md, "adding a Spark operator"):

- `name`: the app-id prefix of its commits and the word in its messages;
- `inputs`: the roles of its input tables (`("stream", "table")`, `("left", "right")`);
- `state_tables`: the Delta tables its state lives in, each appended to or overwritten per batch;
- `step(ctx)`: one micro-batch. From the batch's new input rows and the state as of the batch's
  plan (`StepContext`), it returns the frames to write and a `finish` callback that turns the
  commits' outcome into the values carried to the next batch and the batch's report.

The runtime does the rest: the writer lease, planning (which input versions are new), reading
by pinned Delta versions, the commits (each idempotent by app transaction), the done record,
resuming a crashed batch from its plan, and backfills (`backfill.py`).

The step must be a deterministic function of what the context gives it (no clock, no random
numbers, no dependence on partitioning): a batch re-run after a crash must decide exactly what
the crashed run decided, because some of its writes may already have landed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.incremental.context import StepContext
    from joins.lake import CommitInfo

OUTPUT, QUARANTINE, CHECKPOINTS = "output", "quarantine", "checkpoints"
EVENT_DATE = "event_date"


@dataclass(frozen=True)
class StateTable:
    """One state table of an operator: `overwrite` replaces it each batch that writes it (a
    buffer), `append` adds rows (a keyed log read as "latest per key").

    `stats_columns`: the columns whose bounds someone reads from the table's log statistics
    (the UI's oldest and newest held record); a new table collects only row counts for the
    rest. The engine reads its state whole, so per-column statistics would buy nothing, and
    delta-spark plans them as an aggregate of their own in every write: with them a
    single-record micro-batch of the foreign-key join took a tenth longer."""

    name: str
    mode: Literal["overwrite", "append"]
    partition_by: tuple[str, ...] = ()
    stats_columns: tuple[str, ...] = ()

    @property
    def properties(self) -> dict[str, str]:
        """The Delta properties of the table, when a batch's write creates it."""
        if self.stats_columns:
            return {"delta.dataSkippingStatsColumns": ",".join(self.stats_columns)}
        return {"delta.dataSkippingNumIndexedCols": "0"}


@dataclass(frozen=True)
class Written:
    """A frame a batch writes: `derive(source)` (just `source` without `derive`), with aggregate
    `metrics` observed over `source` while Spark writes (no extra job; `derive` may filter, so
    the metrics can count what is not written). When the write is skipped because a crashed
    run had committed it, the runtime computes them with one aggregate instead, so the report
    is the same either way."""

    source: DataFrame
    derive: Callable[[DataFrame], DataFrame] | None = None
    metrics: Mapping[str, Column] = field(default_factory=dict)

    def frame(self, source: DataFrame | None = None) -> DataFrame:
        df = self.source if source is None else source
        return df if self.derive is None else self.derive(df)


@dataclass(frozen=True)
class TableOutcome:
    """What happened to one written table: the commit (None: an empty append, nothing
    committed) and the observed metrics."""

    commit: CommitInfo | None
    metrics: dict[str, Any]

    @property
    def rows(self) -> int:
        return 0 if self.commit is None else self.commit.rows


@dataclass(frozen=True)
class Outcome:
    """The outcome of every table a batch wrote, by table name (output, quarantine, state)."""

    tables: dict[str, TableOutcome]

    def rows(self, table: str) -> int:
        outcome = self.tables.get(table)
        return 0 if outcome is None else outcome.rows

    def metric(self, table: str, name: str, default: Any = 0) -> Any:
        outcome = self.tables.get(table)
        if outcome is None:
            return default
        value = outcome.metrics.get(name)
        return default if value is None else value

    def partition_values(self, table: str, column: str) -> tuple[str, ...]:
        outcome = self.tables.get(table)
        if outcome is None or outcome.commit is None:
            return ()
        return outcome.commit.partition_values(column)


# (carry for the next batch, report of this batch): both plain JSON.
Finish = Callable[[Outcome], tuple[dict[str, Any], dict[str, Any]]]


@dataclass(frozen=True)
class StepResult:
    output: Written | None = None
    quarantine: Written | None = None
    state: Mapping[str, Written] = field(default_factory=dict)
    finish: Finish = lambda _outcome: ({}, {})
    release: Callable[[], None] = lambda: None  # unpersist what the step cached


class IncrementalOperator(Protocol):
    name: str
    inputs: tuple[str, ...]

    @property
    def state_tables(self) -> tuple[StateTable, ...]: ...

    def step(self, ctx: StepContext) -> StepResult: ...

    def after_done(self, ctx: StepContext) -> None:
        """Maintenance after a batch's done record (compaction); content-preserving."""
        ...
