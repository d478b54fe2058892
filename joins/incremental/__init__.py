"""The incremental runtime every Spark operator plugs into (docs/architecture.md).

An operator gives a step (state before + the batch's new input rows -> output rows + state
after) and its state tables; the runtime finds the new input versions, reads only what
changed, commits output, state and consumed versions exactly once under a writer lease, and
replaces event-day partitions for a backfill in one commit.
"""

from joins.incremental.adapted import DeltaTableSource
from joins.incremental.backfill import (
    BackfillContext,
    BackfillResult,
    BackfillRows,
    DayDiff,
    run_backfill,
)
from joins.incremental.context import StepContext
from joins.incremental.contract import (
    EVENT_DATE,
    OUTPUT,
    QUARANTINE,
    IncrementalOperator,
    Outcome,
    StateTable,
    StepResult,
    TableOutcome,
    Written,
)
from joins.incremental.layout import JoinRoot
from joins.incremental.log import (
    COMPACT_EVERY,
    BatchDone,
    BatchLog,
    BatchPlan,
    BatchStateError,
    LogTail,
    VersionRange,
)
from joins.incremental.runner import DEFAULT_LEASE_TTL_S, DEFAULT_WAIT_S, BatchResult, run_microbatch
from joins.incremental.sources import Source

__all__ = [
    "COMPACT_EVERY",
    "DEFAULT_LEASE_TTL_S",
    "DEFAULT_WAIT_S",
    "EVENT_DATE",
    "OUTPUT",
    "QUARANTINE",
    "BackfillContext",
    "BackfillResult",
    "BackfillRows",
    "BatchDone",
    "BatchLog",
    "BatchPlan",
    "BatchResult",
    "BatchStateError",
    "DayDiff",
    "DeltaTableSource",
    "IncrementalOperator",
    "JoinRoot",
    "LogTail",
    "Outcome",
    "Source",
    "StateTable",
    "StepContext",
    "StepResult",
    "TableOutcome",
    "VersionRange",
    "Written",
    "run_backfill",
    "run_microbatch",
]
