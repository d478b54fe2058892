"""Reproduce a past output of an incremental join from its inputs pinned to the versions that
run read, and compare with what the output held (docs/reproducing.md).

- `reproduce_batch`: micro-batch N's plan (the batch log) pins every input range and state
  version it read; the operator's own step runs again from that plan (what a crashed batch's
  re-run does), nothing is committed, and its output rows are compared with the rows batch N's
  output commit added.
- `reproduce_day`: an event day as the output held it at a commit, rebuilt from the commits
  that wrote it. The day's last backfill up to that commit (if any) names the versions it read:
  the operator's batch form (`backfill_rows`, what a backfill runs) recomputes the day from
  them. Every micro-batch that appended rows of the day after it (or since the beginning) is
  re-run from its plan, its output narrowed to the day. Rows are compared over the columns the
  form says must be equal when a backfill is involved (it cannot know a row's batch), else over
  every column.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.incremental.backfill import BackfillContext, BackfillRows, BatchForm, published_rows
from joins.incremental.context import StepContext
from joins.incremental.contract import EVENT_DATE, OUTPUT
from joins.incremental.layout import JoinRoot
from joins.incremental.log import BatchDone, BatchLog
from joins.incremental.phases import PhaseClock
from joins.incremental.provenance import Pinned, read_backfill_message
from joins.incremental.runner import published
from joins.incremental.sources import Source
from joins.reproduce.diff import BATCH, WRITER, Reproduction, compare_rows
from joins.reproduce.lineage import (
    DayWrite,
    ReproduceError,
    batch_commit,
    day_writes,
    latest_commit,
    require_version,
)
from joins.spark.exprs import with_utc_times

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.incremental.contract import IncrementalOperator


@dataclass(frozen=True)
class Runtime:
    """A join as the runtime runs it: its step, its batch form, its tables and input sources.
    `form` is None where backfills never write the output (the table-result operators: no batch
    form, or one that writes a history table of its own), so an output day is rebuilt from the
    micro-batches alone."""

    join: str
    step: IncrementalOperator
    form: BatchForm | None
    root: JoinRoot
    sources: Mapping[str, Source]

    @property
    def log(self) -> BatchLog:
        return BatchLog(self.root.checkpoints, self.step.name)

    @property
    def output_app(self) -> str:
        return f"{self.step.name}.{OUTPUT}"


def completed_plan(rt: Runtime, batch_id: int) -> Any:
    """Batch `batch_id`'s plan record, or ReproduceError when it never completed (read from the
    batch log with delta-rs: no Spark session needed)."""
    plan, done = rt.log.plan_record(batch_id), rt.log.done_record(batch_id)
    if plan is None or done is None:
        last = rt.log.tail().last_done
        have = "no batch has completed" if last is None else f"batches 0..{last.batch_id} completed"
        state = "was planned but never completed" if plan is not None else "does not exist"
        raise ReproduceError(f"{rt.join}: batch {batch_id} {state} ({have})")
    return plan


def _rerun(spark: SparkSession, rt: Runtime, batch_id: int,
           pins: dict[str, Any]) -> tuple[DataFrame | None, Callable[[], None]]:
    """Batch `batch_id`'s output rows as its step computes them again from its plan (nothing
    is committed), and what releases them; `pins` gets the versions it read."""
    plan = completed_plan(rt, batch_id)
    for role, rng in plan.ranges.items():
        pins[role] = f"{rng.first}..{rng.last}" if not rng.empty else "nothing new"
        if not rng.empty:
            require_version(rt.sources[role].path, rng.last, f"the {role} source {rt.sources[role].path}")
    for name, version in plan.state_versions.items():
        if version is not None:
            pins[f"state {name}"] = version
            require_version(rt.root.state(name), version, f"{rt.join}'s state table {name!r}")
    result = rt.step.step(StepContext(spark, rt.root, plan, rt.sources, PhaseClock(spark, rt.join)))
    return (None if result.output is None else published(result.output, rt.root).frame()), result.release


def reproduce_batch(spark: SparkSession, rt: Runtime, batch_id: int) -> Reproduction:
    """Re-run micro-batch `batch_id` from its plan and compare with the rows it committed."""
    completed_plan(rt, batch_id)
    commit = batch_commit(rt.root.output, rt.output_app, batch_id)
    if commit is not None:
        require_version(rt.root.output, commit, f"{rt.join}'s output")
    pins: dict[str, Any] = {}
    new, release = _rerun(spark, rt, batch_id, pins)
    try:
        old = None if commit is None else lake.read_changes(spark, rt.root.output, commit - 1, commit)
        return compare_rows(rt.join, f"batch {batch_id}", commit, pins, new, old)
    finally:
        release()


def _state_after(rt: Runtime, batch_id: int | None) -> dict[str, int | None]:
    """The state tables' versions as batch `batch_id` left them: what the next batch's plan
    starts from, or (it is the last batch) their latest versions."""
    if batch_id is None:
        return {t.name: None for t in rt.step.state_tables}
    following = rt.log.plan_record(batch_id + 1)
    if following is not None:
        return dict(following.state_versions)
    return {t.name: lake.delta_version(rt.root.state(t.name)) for t in rt.step.state_tables}


def _backfilled(spark: SparkSession, rt: Runtime, day: dt.date, write: DayWrite,
                pins: dict[str, Any]) -> BackfillRows:
    """The day as the backfill of `write` computed it, from the versions its commit names."""
    parsed = read_backfill_message(write.backfill_message or "")
    if parsed is None:
        raise ReproduceError(f"{rt.join}: output commit {write.version} replaced {day} with a "
                             f"backfill that did not record the input versions it read (made "
                             f"before backfills recorded them); the day cannot be pinned there")
    batch, versions = parsed
    done: BatchDone | None = None if batch is None else rt.log.done_record(batch)
    for role, version in versions.items():
        require_version(rt.sources[role].path, version, f"the {role} source {rt.sources[role].path}")
    state = _state_after(rt, batch)
    for name, version in state.items():
        if version is not None:
            require_version(rt.root.state(name), version, f"{rt.join}'s state table {name!r}")
    pins.update({BATCH: batch, **versions, **{f"state {n}": v for n, v in state.items() if v is not None}})
    if rt.form is None:
        raise ReproduceError(f"{rt.join}: output commit {write.version} is a backfill, but this "
                             f"join has no batch form to recompute it with")
    pinned = {role: Pinned(src, versions.get(role)) for role, src in rt.sources.items()}
    ctx = BackfillContext(spark, rt.root, pinned, done, PhaseClock(spark, rt.join), state)
    return published_rows(rt.form.backfill_rows(ctx, [day]), rt.root)


def reproduce_day(spark: SparkSession, rt: Runtime, day: dt.date,
                  commit: int | None = None) -> Reproduction:
    """Rebuild event day `day` as the output held it at output commit `commit` (None: the
    latest) from the writes that made it, and compare."""
    from pyspark.sql import functions as F

    latest = latest_commit(rt.root.output, rt.join)
    commit = latest if commit is None else commit
    if not 0 <= commit <= latest:
        raise ReproduceError(f"{rt.join}: the output has commits 0..{latest}; there is no commit {commit}")
    require_version(rt.root.output, commit, f"{rt.join}'s output")
    writes = day_writes(rt.root.output, day, commit, rt.output_app)
    backfill = next((w for w in reversed(writes) if w.backfill_message is not None), None)
    since = [w for w in writes if backfill is None or w.version > backfill.version]
    batches = [w.batch for w in since if w.batch is not None]
    # Rows a commit from outside the join added cannot be recomputed: they stay in the output
    # side of the comparison, so the report shows them.
    strangers = [w.version for w in since if w.batch is None and w.backfill_message is None]
    pins: dict[str, Any] = {}
    parts: list[DataFrame] = []
    releases: list[Callable[[], None]] = []
    columns: list[str] | None = None
    try:
        if backfill is not None:
            computed = _backfilled(spark, rt, day, backfill, pins)
            if computed.release is not None:
                releases.append(computed.release)
            columns = list(dict.fromkeys([*computed.identity, *computed.compared])) or None
            if computed.rows is not None:
                parts.append(with_utc_times(computed.rows))
        for batch in batches:
            frame, release = _rerun(spark, rt, batch, {})
            releases.append(release)
            if frame is not None:
                parts.append(frame.where(F.col(EVENT_DATE) == F.lit(day)))
        said = [f"the backfill of output commit {backfill.version}"] if backfill is not None else []
        if batches:
            said.append(f"micro-batch(es) {', '.join(str(b) for b in batches)}")
        if strangers:
            said.append(f"output commit(s) {', '.join(map(str, strangers))}, which neither a "
                        f"micro-batch nor a backfill made (not recomputed)")
        pins[WRITER] = " then ".join(said) or "no commit (no micro-batch or backfill wrote that day)"
        if columns is not None:
            parts = [part.select(*columns) for part in parts]
        new = None
        for part in parts:
            new = part if new is None else new.unionByName(part, allowMissingColumns=True)
        old = Source(rt.root.output).rows_of_days(spark, commit, [day]) if writes else None
        return compare_rows(rt.join, f"day {day}", commit, pins, new, old, columns)
    finally:
        for release in releases:
            release()
