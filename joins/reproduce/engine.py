"""Reproduce a past output of an incremental join from its inputs pinned to the versions that
run read, and compare with what the output held (docs/reproducing.md).

- `reproduce_batch`: micro-batch N's plan (the batch log) pins every input range and state
  version it read; the operator's own step runs again from that plan (what a crashed batch's
  re-run does), nothing is committed, and its output rows are compared with the rows batch N's
  output commit added.
- `reproduce_day`: an event day as the output held it at a commit. The day's last writer up to
  that commit says which inputs: a backfill's commit names the versions it read; otherwise the
  micro-batch whose output the commit is consistent with pins them (its consumed versions, and
  the state tables as that batch left them). The operator's batch form (`backfill_rows`, what a
  backfill runs) recomputes the day from those versions; the rows are compared on the columns
  the form says must be equal.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.incremental.backfill import BackfillContext, BatchForm
from joins.incremental.context import StepContext
from joins.incremental.contract import OUTPUT
from joins.incremental.layout import JoinRoot
from joins.incremental.log import BatchDone, BatchLog
from joins.incremental.phases import PhaseClock
from joins.incremental.provenance import Pinned, read_backfill_message
from joins.incremental.runner import with_times
from joins.incremental.sources import Source
from joins.reproduce.diff import BATCH, WRITER, Reproduction, compare_rows
from joins.reproduce.lineage import (
    ReproduceError,
    batch_commit,
    day_writes,
    latest_commit,
    require_version,
    txn_at,
)
from joins.spark.exprs import with_utc_times

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.incremental.contract import IncrementalOperator


@dataclass(frozen=True)
class Runtime:
    """A join as the runtime runs it: its step, its batch form, its tables and input sources."""

    join: str
    step: IncrementalOperator
    form: BatchForm
    root: JoinRoot
    sources: Mapping[str, Source]

    @property
    def log(self) -> BatchLog:
        return BatchLog(self.root.checkpoints, self.step.name)

    @property
    def output_app(self) -> str:
        return f"{self.step.name}.{OUTPUT}"


def reproduce_batch(spark: SparkSession, rt: Runtime, batch_id: int) -> Reproduction:
    """Re-run micro-batch `batch_id` from its plan and compare with the rows it committed."""
    plan, done = rt.log.plan_record(batch_id), rt.log.done_record(batch_id)
    if plan is None or done is None:
        last = rt.log.tail().last_done
        have = "no batch has completed" if last is None else f"batches 0..{last.batch_id} completed"
        state = "was planned but never completed" if plan is not None else "does not exist"
        raise ReproduceError(f"{rt.join}: batch {batch_id} {state} ({have})")
    pins: dict[str, Any] = {}
    for role, rng in plan.ranges.items():
        pins[role] = f"{rng.first}..{rng.last}" if not rng.empty else "nothing new"
        if not rng.empty:
            require_version(rt.sources[role].path, rng.last, f"the {role} source {rt.sources[role].path}")
    for name, version in plan.state_versions.items():
        if version is not None:
            pins[f"state {name}"] = version
            require_version(rt.root.state(name), version, f"{rt.join}'s state table {name!r}")
    commit = batch_commit(rt.root.output, rt.output_app, batch_id)
    if commit is not None:
        require_version(rt.root.output, commit, f"{rt.join}'s output")
    result = rt.step.step(StepContext(spark, rt.root, plan, rt.sources, PhaseClock(spark, rt.join)))
    try:
        new = None if result.output is None else with_times(result.output).frame()
        old = None if commit is None else lake.read_changes(spark, rt.root.output, commit - 1, commit)
        return compare_rows(rt.join, f"batch {batch_id}", commit, pins, new, old)
    finally:
        result.release()


def _state_after(rt: Runtime, batch_id: int | None) -> dict[str, int | None]:
    """The state tables' versions as batch `batch_id` left them: what the next batch's plan
    starts from, or (it is the last batch) their latest versions."""
    if batch_id is None:
        return {t.name: None for t in rt.step.state_tables}
    following = rt.log.plan_record(batch_id + 1)
    if following is not None:
        return dict(following.state_versions)
    return {t.name: lake.delta_version(rt.root.state(t.name)) for t in rt.step.state_tables}


def _day_pins(rt: Runtime, day: dt.date, commit: int) -> tuple[int | None, dict[str, int], str]:
    """(batch, input versions, who wrote the day last) for the day as the output held it."""
    writes = day_writes(rt.root.output, day, commit)
    last = writes[-1] if writes else None
    if last is not None and last.backfill_message is not None:
        parsed = read_backfill_message(last.backfill_message)
        if parsed is None:
            raise ReproduceError(f"{rt.join}: output commit {last.version} replaced {day} with a "
                                 f"backfill that did not record the input versions it read "
                                 f"(made before backfills recorded them); back to that commit "
                                 f"the day cannot be pinned")
        return parsed[0], parsed[1], f"the backfill of output commit {last.version}"
    batch = txn_at(rt.root.output, commit, rt.output_app)
    done = None if batch is None else rt.log.done_record(batch)
    consumed = {} if done is None else dict(done.consumed)
    return batch, consumed, "micro-batches" if writes else "nobody (no row of that day)"


def reproduce_day(spark: SparkSession, rt: Runtime, day: dt.date,
                  commit: int | None = None) -> Reproduction:
    """Recompute event day `day` as the output held it at output commit `commit` (None: the
    latest) and compare."""
    latest = latest_commit(rt.root.output, rt.join)
    commit = latest if commit is None else commit
    if not 0 <= commit <= latest:
        raise ReproduceError(f"{rt.join}: the output has commits 0..{latest}; there is no commit {commit}")
    require_version(rt.root.output, commit, f"{rt.join}'s output")
    batch, versions, writer = _day_pins(rt, day, commit)
    done: BatchDone | None = None if batch is None else rt.log.done_record(batch)
    for role, version in versions.items():
        require_version(rt.sources[role].path, version, f"the {role} source {rt.sources[role].path}")
    state = _state_after(rt, batch)
    for name, version in state.items():
        if version is not None:
            require_version(rt.root.state(name), version, f"{rt.join}'s state table {name!r}")
    pinned = {role: Pinned(src, versions.get(role)) for role, src in rt.sources.items()}
    ctx = BackfillContext(spark, rt.root, pinned, done, PhaseClock(spark, rt.join), state)
    computed = rt.form.backfill_rows(ctx, [day])
    pins: dict[str, Any] = {WRITER: writer, BATCH: batch, **versions,
                            **{f"state {n}": v for n, v in state.items() if v is not None}}
    try:
        columns = list(dict.fromkeys([*computed.identity, *computed.compared]))
        new = None if computed.rows is None else with_utc_times(computed.rows)
        old = Source(rt.root.output).rows_of_days(spark, commit, [day])
        return compare_rows(rt.join, f"day {day}", commit, pins, new, old, columns or None)
    finally:
        if computed.release is not None:
            computed.release()
