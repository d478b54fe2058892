"""Backfill: recompute whole event days with an operator's batch form and replace exactly
those days of the output in one commit.

The runtime's part (every operator the same):

- **One writer.** The backfill holds the join's writer lease for its whole run (it waits for a
  running micro-batch, up to `wait_s`), refuses to run while a micro-batch is planned but not
  done (its rows may be half in the output), and its replace commit is guarded by the output
  table's version: if anything committed to the output since the backfill read it (a writer
  whose lease it outlived), the replace fails with ConcurrentCommitError instead of deleting
  rows it never saw. Files of a backfill that crashed before that commit are removed by the
  next one (`joins.lake.remove_leftovers`).
- **A report, and no commit when nothing differs.** Old rows of the days (at the pinned output
  version) are matched to the new ones by the operator's identity columns: per day, rows
  added, removed and changed. When nothing differs there is no commit, so the rows keep their
  micro-batch lineage. `dry_run` computes the same report and never commits (the agreement
  check of the Dagster layer).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from joins import lake
from joins.errors import ConfigError
from joins.incremental import hooks
from joins.incremental.contract import EVENT_DATE, OUTPUT
from joins.incremental.layout import JoinRoot
from joins.incremental.log import BatchDone, BatchLog, BatchStateError
from joins.incremental.phases import PhaseClock
from joins.incremental.provenance import Pinned, backfill_message
from joins.incremental.runner import DEFAULT_LEASE_TTL_S, as_sources, check_progress
from joins.incremental.sources import Source
from joins.spark.exprs import count_if, with_utc_times

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.incremental.contract import IncrementalOperator

DEFAULT_BACKFILL_WAIT_S = 600.0
ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"


@dataclass(frozen=True)
class DayDiff:
    """Output rows of one event day before and after the backfill, and how they differ."""

    day: str
    rows_before: int = 0
    rows_after: int = 0
    added: int = 0
    removed: int = 0
    changed: int = 0


@dataclass(frozen=True)
class BackfillRows:
    """An operator's batch form for some days: the output rows, how a new row is matched to an
    old one (`identity`), which columns must be equal (`compared`; lineage columns are not),
    and counts for the operator's report (plain values)."""

    rows: DataFrame | None          # None: nothing to recompute (no batch has consumed input)
    identity: tuple[str, ...] = ()
    compared: tuple[str, ...] = ()
    counts: dict[str, Any] = field(default_factory=dict)
    release: Any = None             # callable: unpersist what the batch form cached


@dataclass
class BackfillContext:
    spark: SparkSession
    root: JoinRoot
    sources: Mapping[str, Source]
    last_done: BatchDone | None
    clock: PhaseClock
    # Versions of the join's state tables as of `last_done` (None: their latest, which they
    # are while a backfill holds the lease; a reproduction of a past day pins older ones).
    state_versions: Mapping[str, int | None] | None = None

    def state_version(self, name: str) -> int | None:
        """The version of state table `name` consistent with `last_done` (None: no table)."""
        if self.state_versions is not None:
            return self.state_versions.get(name)
        return lake.delta_version(self.root.state(name))

    def consumed(self, role: str) -> int | None:
        """The last version of `role` the micro-batches consumed (None: no batch yet)."""
        return None if self.last_done is None else self.last_done.consumed[role]

    def phase(self, name: str) -> contextlib.AbstractContextManager[None]:
        return self.clock.phase(name)


def published_rows(computed: BackfillRows, root: JoinRoot) -> BackfillRows:
    """A batch form's rows as the output publishes them (`root.projection`), with the columns
    they are matched and compared by under their published names."""
    projection = root.projection
    if projection is None:
        return computed
    return dataclasses.replace(
        computed, rows=None if computed.rows is None else projection.apply(computed.rows),
        identity=projection.names(computed.identity), compared=projection.names(computed.compared))


class BatchForm(Protocol):
    def backfill_rows(self, ctx: BackfillContext, days: list[dt.date]) -> BackfillRows: ...


def target_table(form: BatchForm) -> str:
    """The table a batch form's days replace: the join's output, unless the form names
    another of the join's tables (`target`, e.g. a temporal history beside a changelog)."""
    return str(getattr(form, "target", OUTPUT))


@dataclass(frozen=True)
class BackfillResult:
    days: tuple[str, ...]
    last_batch_id: int | None           # the micro-batch the backfill is consistent with
    output_version_before: int | None
    commit_version: int | None          # the replace commit (None: nothing replaced)
    per_day: tuple[DayDiff, ...]
    counts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def added(self) -> int:
        return sum(d.added for d in self.per_day)

    @property
    def removed(self) -> int:
        return sum(d.removed for d in self.per_day)

    @property
    def changed(self) -> int:
        return sum(d.changed for d in self.per_day)

    @property
    def agrees(self) -> bool:
        return self.added == 0 and self.removed == 0 and self.changed == 0


def parse_days(name: str, days: Sequence[str | dt.date]) -> list[dt.date]:
    if isinstance(days, str) or not days:
        raise ConfigError(f"{name}: backfill days must be a non-empty list of dates "
                          f"(YYYY-MM-DD), got {days!r}")
    parsed: list[dt.date] = []
    for day in days:
        if isinstance(day, dt.datetime):
            raise ConfigError(f"{name}: backfill day {day!r} is a datetime; give a date")
        if isinstance(day, dt.date):
            parsed.append(day)
            continue
        try:
            parsed.append(dt.date.fromisoformat(str(day)))
        except ValueError:
            raise ConfigError(f"{name}: backfill day {day!r} is not a date (YYYY-MM-DD)") from None
    return sorted(set(parsed))


def run_backfill(spark: SparkSession, operator: IncrementalOperator, form: BatchForm,
                 root: str | JoinRoot, sources: Mapping[str, Source | str],
                 days: Sequence[str | dt.date], *, dry_run: bool = False,
                 wait_s: float = DEFAULT_BACKFILL_WAIT_S,
                 lease_ttl_s: float = DEFAULT_LEASE_TTL_S) -> BackfillResult:
    """Recompute `days` (event dates) with `form` and replace exactly those days' output rows
    in one version-guarded commit; report the difference to what was there."""
    jr = root if isinstance(root, JoinRoot) else JoinRoot(root)
    srcs = as_sources(operator, sources)
    wanted = parse_days(operator.name, days)
    clock = PhaseClock(spark, operator.name)
    purpose = f"{operator.name} {'agreement check' if dry_run else 'backfill'} of " \
              f"{wanted[0]}..{wanted[-1]}"
    lease = lake.Lease(jr.lease, purpose=purpose, ttl_s=lease_ttl_s)
    with lease.held(wait_s=wait_s, on_wait=hooks.waiting_for_the_lease):
        with clock.phase("backfill plan"):
            tail = BatchLog(jr.checkpoints, operator.name).tail()
            if tail.pending is not None:
                raise BatchStateError(f"{operator.name}: micro-batch {tail.pending.batch_id} under "
                                      f"{jr.root} is planned but not completed; run it before a "
                                      f"backfill")
            done = tail.last_done
            if done is not None:
                versions = {}
                for role, source in srcs.items():
                    v = source.version()
                    if v is None:
                        raise ConfigError(f"{operator.name}: the {role} source {source.path!r} is "
                                          f"not a Delta table")
                    versions[role] = v
                check_progress(operator.name, done, versions, jr)
            target = jr.sub(target_table(form))
            if not dry_run:
                # A backfill that crashed before its replace commit left its files.
                lake.remove_leftovers(spark, [target], writer=purpose, before_commit=lease.check)
            output_before = lake.delta_version(target)
            # Read once under the lease: what the form reads "at the latest version" and what the
            # commit records (joins.reproduce recomputes the days from exactly these).
            pinned = {role: Pinned(source, source.version()) for role, source in srcs.items()}
        ctx = BackfillContext(spark, jr, pinned, done, clock)
        computed = published_rows(form.backfill_rows(ctx, wanted), jr)
        try:
            return _replace(spark, operator.name, target, wanted, computed, done, output_before,
                            lease, clock, dry_run=dry_run,
                            inputs={role: p.pinned for role, p in pinned.items()})
        finally:
            if computed.release is not None:
                computed.release()


def _replace(spark: SparkSession, name: str, target: str, wanted: list[dt.date],
             computed: BackfillRows, done: BatchDone | None, output_before: int | None,
             lease: lake.Lease, clock: PhaseClock, *, dry_run: bool,
             inputs: Mapping[str, int | None]) -> BackfillResult:
    day_strings = tuple(d.isoformat() for d in wanted)
    if computed.rows is None:
        return BackfillResult(day_strings, None if done is None else done.batch_id, output_before,
                              None, tuple(DayDiff(d) for d in day_strings), computed.counts,
                              clock.timings)
    new = with_utc_times(computed.rows).persist()
    try:
        old = None
        if output_before is not None:
            old = Source(target).rows_of_days(spark, output_before, wanted)
        with clock.phase("backfill diff"):
            per_day = diff_days(new, old, identity=computed.identity, compared=computed.compared)
        commit_version = None
        hooks.at("backfill computed")
        if not dry_run and any(d.added or d.removed or d.changed for d in per_day):
            lease.check()
            with clock.phase("backfill commit"):
                info = lake.write_delta(
                    new, target, mode="overwrite", partition_by=[EVENT_DATE],
                    replace_partitions={EVENT_DATE: list(wanted)}, schema_mode="merge",
                    expected_version=-1 if output_before is None else output_before,
                    commit_message=backfill_message(name, day_strings,
                                                    None if done is None else done.batch_id, inputs))
            commit_version = info.version
    finally:
        new.unpersist()
    all_days = tuple(next((d for d in per_day if d.day == s), DayDiff(s)) for s in day_strings)
    return BackfillResult(day_strings, None if done is None else done.batch_id, output_before,
                          commit_version, all_days, computed.counts, clock.timings)


def diff_days(new: DataFrame, old: DataFrame | None, *, identity: Sequence[str],
              compared: Sequence[str]) -> list[DayDiff]:
    """Per day: rows before/after, and rows added, removed or changed, matched by `identity`.
    Only one small row per day reaches the driver."""
    from pyspark.sql import functions as F

    def column(df: DataFrame, c: str) -> Column:
        # A column the old rows lack (the pipeline publishes it since a change of its `select`)
        # is null there, so those rows count as changed and the backfill republishes them.
        return F.col(c) if c in df.columns else F.lit(None).cast(new.schema[c].dataType).alias(c)

    def side(df: DataFrame, name: str) -> DataFrame:
        return df.select(F.struct(*identity).alias("_k"),
                         F.struct(*(column(df, c) for c in compared)).alias(name),
                         F.col(EVENT_DATE).cast("string").alias(f"{name}_day"))

    right = side(new, "_new")
    if old is None:
        merged = right.withColumn("_old", F.lit(None)).withColumn("_old_day", F.lit(None).cast("string"))
    else:
        merged = side(old, "_old").join(right, "_k", "full_outer")
    has_old, has_new = F.col("_old").isNotNull(), F.col("_new").isNotNull()
    kind = (F.when(has_old & has_new & ~F.col("_old").eqNullSafe(F.col("_new")), F.lit(CHANGED))
            .when(has_old & has_new, F.lit(SAME))
            .when(has_new, F.lit(ADDED)).otherwise(F.lit(REMOVED)))
    rows = (merged.withColumn("_diff", kind)
            .withColumn("_day", F.coalesce(F.col("_new_day"), F.col("_old_day")))
            .groupBy("_day").agg(
                count_if(has_old).alias("before"), count_if(has_new).alias("after"),
                *(count_if(F.col("_diff") == k).alias(k) for k in (ADDED, REMOVED, CHANGED)))
            .collect())
    return sorted((DayDiff(day=r["_day"], rows_before=int(r["before"]), rows_after=int(r["after"]),
                           added=int(r[ADDED]), removed=int(r[REMOVED]), changed=int(r[CHANGED]))
                   for r in rows), key=lambda d: d.day)
