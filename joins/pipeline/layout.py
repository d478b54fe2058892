"""Where a pipeline's data lives under the lake root.

    <root>/landing/<source>        landing files (unless the source names another folder)
    <root>/tables/<source>         the source's Delta table (versioned table or events table)
    <root>/quarantine/<source>     input rows not stored, with the reason
    <root>/manifests/<source>      which landing files each ingest batch took
    <root>/leases/<source>         the ingest's writer lease (one ingest of a source at a time)
    <root>/joins/<join>/           the join (joins.incremental.layout): output, quarantine,
                                   state, checkpoints, lease
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.incremental.layout import JoinRoot
from joins.pipeline.sources import SourceSpec

if TYPE_CHECKING:
    from joins.ingest import IngestSource
    from joins.pipeline.spec import PipelineInput, PipelineSpec


@dataclass(frozen=True)
class PipelineLayout:
    """Absolute paths (or URIs) of every folder and Delta table of one pipeline spec."""

    root: str
    spec: PipelineSpec

    def _under(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def landing(self, source: SourceSpec) -> str:
        if source.landing is None:
            return self._under("landing", source.name)
        if "://" in source.landing or os.path.isabs(source.landing):
            return source.landing.rstrip("/")
        return self._under(*source.landing.strip("/").split("/"))

    def table(self, source: SourceSpec) -> str:
        return self._under("tables", source.name)

    def quarantine(self, source: SourceSpec) -> str:
        return self._under("quarantine", source.name)

    def manifest(self, source: SourceSpec) -> str:
        return self._under("manifests", source.name)

    def lease(self, source: SourceSpec) -> str:
        return self._under("leases", source.name)

    def input_table(self, role: str) -> str:
        return self.table(self.spec.input(role).source)

    def ingest_source(self, item: PipelineInput) -> IngestSource:
        """The ingest engine's view of one of the spec's inputs."""
        from joins.ingest import IngestSource

        source = item.source
        versioned = item.kind == "versioned"
        return IngestSource(
            name=source.name, kind="table" if versioned else "stream", landing=self.landing(source),
            spec=source.landing_spec(), table=self.table(source),
            quarantine=self.quarantine(source), manifest=self.manifest(source),
            lease=self.lease(source),
            history_retention_ms=item.history_retention_ms if versioned else None)

    @property
    def join(self) -> JoinRoot:
        return JoinRoot(self._under("joins", self.spec.name))

    @property
    def join_root(self) -> str:
        return self.join.root

    @property
    def output(self) -> str:
        return self.join.output

    @property
    def join_quarantine(self) -> str:
        return self.join.quarantine
