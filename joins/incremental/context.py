"""What a step sees: the batch's new input rows and its state, all as of the batch's plan.

Every read is by Delta version, never "latest": a batch re-run after a crash reads exactly what
the crashed run read, even if that run already overwrote a state table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.incremental.layout import JoinRoot
from joins.incremental.log import BatchPlan, VersionRange
from joins.incremental.phases import PhaseClock
from joins.spark.frames import checkpointed
from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from joins.incremental.sources import Source


@dataclass
class StepContext:
    spark: SparkSession
    root: JoinRoot
    plan: BatchPlan
    sources: Mapping[str, Source]
    clock: PhaseClock
    # change_stats per role: the versions are pinned, so one log read serves the whole step.
    _stats: dict[str, lake.ChangeStats | None] = field(default_factory=dict, init=False,
                                                       repr=False)

    @property
    def batch_id(self) -> int:
        return self.plan.batch_id

    @property
    def carry(self) -> dict[str, Any]:
        """Values the previous batch carried over (stream times, counts); {} for the first."""
        return self.plan.carry

    def range(self, role: str) -> VersionRange:
        return self.plan.ranges[role]

    def source_path(self, role: str) -> str:
        return self.sources[role].path

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with self.clock.phase(name):
            yield

    # -- inputs ------------------------------------------------------------------------------

    def schema(self, role: str) -> StructType:
        """The input's schema as the step sees its rows (at the pinned version)."""
        return self.sources[role].schema(self.spark, self.range(role).last)

    def changes(self, role: str) -> DataFrame:
        """The rows the batch's versions of `role` added (an empty frame when none)."""
        rng = self.range(role)
        source = self.sources[role]
        if rng.empty:
            return local_rows(self.spark, [], source.schema(self.spark, rng.last))
        return source.changes(self.spark, rng.first - 1, rng.last)

    def change_stats(self, role: str) -> lake.ChangeStats | None:
        """Rows and column bounds of the batch's new rows from Delta statistics (no Spark job);
        None when the range holds a rewrite (compaction, overwrite) or the source is adapted."""
        if role not in self._stats:
            rng = self.range(role)
            self._stats[role] = (lake.ChangeStats(rows=0, files=0) if rng.empty else
                                 self.sources[role].change_stats(rng.first - 1, rng.last))
        return self._stats[role]

    def new_rows(self, *roles: str) -> int | None:
        """How many rows the batch's versions of `roles` added together, from Delta statistics
        (None: unknown for one of them)."""
        total = 0
        for role in roles:
            stats = self.change_stats(role)
            if stats is None or stats.rows is None:
                return None
            total += stats.rows
        return total

    def identity(self, role: str) -> lake.TableIdentity:
        """Which table the input is at the batch's pinned version (its Delta id and rows)."""
        return self.sources[role].identity(self.range(role).last)

    def changes_after(self, role: str, version: int) -> DataFrame | None:
        """The rows the input's versions after `version` up to the pinned one added; None when
        a commit in between rewrote rows (a compaction): they are no changelog then."""
        last = self.range(role).last
        try:
            return self.sources[role].changes(self.spark, version, last)
        except lake.LakeError:
            return None

    def snapshot(self, role: str, columns: Sequence[str] | None = None) -> DataFrame:
        """The whole input at the batch's pinned version (e.g. a versioned table's history)."""
        return self.sources[role].snapshot(self.spark, self.range(role).last, columns)

    # -- state -------------------------------------------------------------------------------

    def state_version(self, name: str) -> int | None:
        return self.plan.state_versions.get(name)

    def state(self, name: str, columns: Sequence[str] | None = None) -> DataFrame | None:
        """A state table as the batch starts from it (None before its first write)."""
        version = self.state_version(name)
        if version is None:
            return None
        return lake.read_delta(self.spark, self.root.state(name), version=version, columns=columns)

    # -- materializing -----------------------------------------------------------------------

    def checkpoint_counted(self, frame: DataFrame, metrics: Mapping[str, Column],
                           name: str) -> tuple[DataFrame, dict[str, Any]]:
        """`frame` materialized once (a local checkpoint) and `metrics` (aggregates by name)
        over its rows, counted by the same Spark action (an observation). Spark Connect
        reports no metrics for a checkpoint: there one aggregate over the checkpoint counts."""
        from pyspark.sql import Observation

        observation = Observation(f"{name}_{self.batch_id}")
        aliased = [e.alias(n) for n, e in metrics.items()]
        checkpoint = checkpointed(frame.observe(observation, *aliased))
        counted = observation.get
        if not counted:
            row = checkpoint.agg(*aliased).first()
            assert row is not None
            counted = row.asDict()
        return checkpoint, dict(counted)
