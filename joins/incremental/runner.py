"""One micro-batch of any operator, exactly once (see docs/architecture.md).

    lease -> plan (write-ahead) -> step -> commits (output, quarantine, state) -> done

- **One writer.** The batch runs under the join's writer lease (`joins.lake.Lease`): a second
  micro-batch or a backfill of the same join waits for it (up to `wait_s`), then gives up with a
  reason; it never runs beside it. The lease is checked before every commit, so a writer whose
  lease expired (a paused process) stops instead of committing over its successor.
- **Same inputs on a re-run.** The plan pins the input versions the batch consumes and the
  versions of the state tables it starts from; a crashed batch is re-run from its plan.
- **No duplicate, no gap.** Every commit carries an application transaction (`<op>.<table>`,
  version = batch id): a write that had landed before a crash is skipped by the re-run, a write
  that had not is made by it. Only the done record ends a batch, and it comes last.
- **No leftovers.** Files a crashed writer staged but never committed are removed by the next
  micro-batch, after a fence commit that makes the crashed writer's commits fail should it
  only have been paused (`joins.lake.remove_leftovers`; every commit here is `exclusive`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from joins import lake
from joins.errors import ConfigError
from joins.incremental import hooks
from joins.incremental.context import StepContext
from joins.incremental.contract import (
    CHECKPOINTS,
    EVENT_DATE,
    OUTPUT,
    QUARANTINE,
    IncrementalOperator,
    Outcome,
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
from joins.incremental.phases import PhaseClock
from joins.incremental.projection import projected
from joins.incremental.sources import Source
from joins.incremental.staged import Staged, stager
from joins.spark.exprs import with_utc_times
from joins.spark.parallel import run_all

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# How long a micro-batch waits for another writer of its join before it gives up (skipped).
DEFAULT_WAIT_S = 60.0
DEFAULT_LEASE_TTL_S = 60.0


@dataclass(frozen=True)
class BatchResult:
    """What one call did: a batch run (or re-run), or a skip with its reason."""

    batch_id: int | None
    skipped: bool = False
    skip_reason: str | None = None
    done: BatchDone | None = None     # the batch's done record (or the last one, when skipped)
    plan: BatchPlan | None = None
    commits: dict[str, int | None] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def as_sources(operator: IncrementalOperator, sources: Mapping[str, Source | str]) -> dict[str, Source]:
    if set(sources) != set(operator.inputs):
        raise ConfigError(f"{operator.name}: inputs are {list(operator.inputs)}, got "
                          f"{sorted(sources)}")
    return {role: Source(s) if isinstance(s, str) else s for role, s in sources.items()}


def run_microbatch(spark: SparkSession, operator: IncrementalOperator, root: str | JoinRoot,
                   sources: Mapping[str, Source | str], *, batch_id: int | None = None,
                   wait_s: float = DEFAULT_WAIT_S,
                   lease_ttl_s: float = DEFAULT_LEASE_TTL_S) -> BatchResult:
    """Run the next micro-batch of `operator` under `root` (or re-run a crashed one).

    batch_id: None = the next one (or the planned-but-unfinished one); an id at or below the
        last completed batch returns that batch's done record with `skipped` set.
    """
    jr = root if isinstance(root, JoinRoot) else JoinRoot(root)
    srcs = as_sources(operator, sources)
    clock = PhaseClock(spark, operator.name)
    lease = lake.Lease(jr.lease, purpose=f"{operator.name} micro-batch", ttl_s=lease_ttl_s)
    with contextlib.ExitStack() as stack:
        try:
            with clock.phase("lease"):
                stack.enter_context(lease.held(wait_s=wait_s, on_wait=hooks.waiting_for_the_lease))
        except lake.WriterBusyError as exc:
            return BatchResult(None, skipped=True, timings=clock.timings,
                               skip_reason=f"another writer of this join is running: "
                                           f"{exc.holder.describe()}")
        log = BatchLog(jr.checkpoints, operator.name)
        with clock.phase("plan"):
            tail = log.tail()
        if may_have_leftovers(tail):
            with clock.phase("leftovers"):
                lake.remove_leftovers(spark, written_tables(operator, jr),
                                      writer=f"{operator.name} micro-batch",
                                      before_commit=lease.check)
        with clock.phase("plan"):
            planned = _plan(operator, jr, srcs, log, tail, batch_id)
        if isinstance(planned, BatchResult):
            return dataclasses.replace(planned, timings=clock.timings)
        hooks.at("planned")
        return _execute(spark, operator, jr, srcs, planned, log, lease, clock)
    raise AssertionError("unreachable")


def may_have_leftovers(tail: LogTail) -> bool:
    """Whether a writer may have died between staging files and committing them: a batch
    planned but not done, or the batch that compacted (its maintenance writes come after the
    done record). Checking every batch would read every table's log each micro-batch."""
    done = tail.last_done
    return tail.pending is not None or (
        done is not None and done.batch_id % COMPACT_EVERY == COMPACT_EVERY - 1)


def written_tables(operator: IncrementalOperator, root: JoinRoot) -> list[str]:
    """The tables the runtime writes with Spark (the batch log is delta-rs's own small write)."""
    return [root.output, root.quarantine, *(root.state(t.name) for t in operator.state_tables)]


def _plan(operator: IncrementalOperator, root: JoinRoot, sources: dict[str, Source],
          log: BatchLog, tail: LogTail, batch_id: int | None) -> BatchPlan | BatchResult:
    name = operator.name
    if batch_id is not None and batch_id < 0:
        raise ConfigError(f"{name}: batch_id must be >= 0, got {batch_id}")
    done, pending = tail.last_done, tail.pending
    if batch_id is not None and done is not None and batch_id <= done.batch_id:
        record = done if batch_id == done.batch_id else log.done_record(batch_id)
        if record is None:
            raise BatchStateError(f"{name}: batch {batch_id} was never run under {root.root} "
                                  f"(the last completed batch is {done.batch_id})")
        return BatchResult(batch_id, skipped=True, done=record,
                           skip_reason=f"batch {batch_id} is already committed")
    paths = {role: s.path for role, s in sources.items()}
    if pending is not None:
        if batch_id is not None and batch_id != pending.batch_id:
            raise BatchStateError(
                f"{name}: batch {pending.batch_id} under {root.root} is planned but not "
                f"completed; re-run it (batch_id={pending.batch_id} or None) before batch {batch_id}")
        # A crashed batch: the same inputs by version; the source paths of this call, so that a
        # lake moved since still works.
        return dataclasses.replace(pending, sources=paths)
    versions = {}
    for role, source in sources.items():
        version = source.version()
        if version is None:
            raise ConfigError(f"{name}: the {role} source {source.path!r} is not a Delta table "
                              f"(create it first; an empty table is fine)")
        versions[role] = version
    if done is not None:
        check_progress(name, done, versions, root)
    ranges = {role: VersionRange(0 if done is None else done.consumed[role] + 1, v)
              for role, v in versions.items()}
    if done is not None and all(r.empty for r in ranges.values()):
        at = ", ".join(f"{role} version {v}" for role, v in versions.items())
        return BatchResult(None, skipped=True, done=done,
                           skip_reason=f"no new rows in {' or '.join(operator.inputs)} since "
                                       f"batch {done.batch_id} ({at})")
    plan = BatchPlan(
        batch_id=batch_id if batch_id is not None else (0 if done is None else done.batch_id + 1),
        sources=paths, ranges=ranges,
        state_versions={t.name: lake.delta_version(root.state(t.name)) for t in operator.state_tables},
        carry={} if done is None else dict(done.carry))
    if not log.write_plan(plan):
        # Only a writer that lost its lease gets here: another one planned this batch id.
        raise BatchStateError(f"{name}: batch {plan.batch_id} under {root.root} was planned by "
                              f"another writer meanwhile; this run stops without computing it")
    return plan


def check_progress(name: str, done: BatchDone, versions: Mapping[str, int], root: JoinRoot) -> None:
    """Source versions never go backwards: a source older than what the join consumed is
    another table (recreated, or the wrong path). (Paths are not compared: a lake copied or
    mounted elsewhere is still the same lake.)"""
    behind = {role: (done.consumed[role], v) for role, v in versions.items()
              if v < done.consumed.get(role, -1)}
    if behind:
        said = "; ".join(f"the {role} source up to version {c}, but it is now at version {v}"
                         for role, (c, v) in behind.items())
        raise BatchStateError(f"{name}: the join under {root.root} consumed {said}: it is not "
                              f"the table this join read (use a new root for new sources)")


def _execute(spark: SparkSession, operator: IncrementalOperator, root: JoinRoot,
             sources: dict[str, Source], plan: BatchPlan, log: BatchLog, lease: lake.Lease,
             clock: PhaseClock) -> BatchResult:
    bid = plan.batch_id
    ctx = StepContext(spark, root, plan, sources, clock)
    result = operator.step(ctx)
    outcomes: dict[str, TableOutcome] = {}
    commits: dict[str, int | None] = {}
    writes = _writes(operator, result, root)
    staged: dict[str, Staged] = {}
    try:
        # Every table's files first, their Spark jobs side by side; then the commits, one by
        # one in their order, each preceded by its failpoint and the lease check.
        with clock.phase("write"):
            run_all(spark, [stager(operator.name, root.sub(w.table), w.table, w.written, bid,
                                    mode=w.mode, partition_by=w.partition_by, into=staged,
                                    add_columns=w.table == OUTPUT, properties=w.properties)
                            for w in writes])
        for table in (w.table for w in writes):
            hooks.at(f"before commit {table}")
            lease.check()
            with clock.phase(f"commit {table}"):
                outcome = staged.pop(table).commit(root.sub(table))
            outcomes[table] = outcome
            if outcome.commit is not None and outcome.commit.version is not None \
                    and not outcome.commit.skipped:
                commits[table] = outcome.commit.version
    finally:
        for left in staged.values():
            left.write.abandon()
        result.release()
    carry, report = result.finish(Outcome(outcomes))
    done = BatchDone(batch_id=bid, sources=dict(plan.sources),
                     consumed={role: r.last for role, r in plan.ranges.items()},
                     carry=carry, report=report)
    hooks.at("before done")
    lease.check()
    with clock.phase("done"):
        commits[CHECKPOINTS] = log.write_done(done)
    if bid % COMPACT_EVERY == COMPACT_EVERY - 1:
        with clock.phase("compact"):
            log.compact()
            operator.after_done(ctx)
    return BatchResult(bid, done=done, plan=plan, commits=commits, timings=clock.timings)


class TableWrite(NamedTuple):
    """One table a batch writes: its frame, the write's mode and partition columns, and the
    properties of the table if this write creates it."""

    table: str
    written: Written
    mode: str
    partition_by: list[str]
    properties: dict[str, str] | None


def _writes(operator: IncrementalOperator, result: StepResult, root: JoinRoot) -> list[TableWrite]:
    """The tables the batch writes, in commit order."""
    out: list[TableWrite] = []
    if result.output is not None:
        out.append(TableWrite(OUTPUT, published(result.output, root), "append", [EVENT_DATE], None))
    if result.quarantine is not None:
        out.append(TableWrite(QUARANTINE, result.quarantine, "append", [], None))
    for table in operator.state_tables:
        written = result.state.get(table.name)
        if written is not None:
            out.append(TableWrite(table.name, written, table.mode, list(table.partition_by),
                                  table.properties))
    unknown = set(result.state) - {t.name for t in operator.state_tables}
    if unknown:
        raise ConfigError(f"{operator.name}: the step wrote undeclared state tables {sorted(unknown)}")
    return out


def published(written: Written, root: JoinRoot) -> Written:
    """An output as written: the pipeline's projection of its value columns (`root.projection`),
    then every event-time column with its TIMESTAMP twin beside it."""
    derive, projection = written.derive, root.projection

    def derived(df: DataFrame) -> DataFrame:
        return with_utc_times(projected(df if derive is None else derive(df), projection))

    return dataclasses.replace(written, derive=derived)
