"""Where one incremental join keeps its tables: everything under one root.

    <root>/output          the join's output (Delta, partitioned by event day)
    <root>/quarantine      input rows the join did not take, each with the reason
    <root>/checkpoints     the batch log (plan before a batch computes, done after its commits)
    <root>/<state name>    each state table the operator declares (buffers, keyed state, ...)
    <root>/_lease          the writer lease: one micro-batch or backfill at a time
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from joins.incremental.projection import Projection


@dataclass(frozen=True)
class JoinRoot:
    """`projection`: the value columns the output publishes (a pipeline's `select`; None: all
    the operator writes), applied by the runtime to every output write (`projection.py`)."""

    root: str
    projection: Projection | None = None

    def sub(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    @property
    def output(self) -> str:
        return self.sub("output")

    @property
    def quarantine(self) -> str:
        return self.sub("quarantine")

    @property
    def checkpoints(self) -> str:
        return self.sub("checkpoints")

    @property
    def lease(self) -> str:
        return self.sub("_lease")

    def state(self, name: str) -> str:
        return self.sub(name)
