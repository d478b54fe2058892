"""Where a join spec's data lives under the lake root.

    <root>/landing/<source>        landing files (unless the source names another folder)
    <root>/tables/<source>         the versioned table (table source) / the events table (stream)
    <root>/quarantine/<source>     input rows not stored, with the reason
    <root>/manifests/<source>      which landing files each ingest batch took
    <root>/leases/<source>         the writer lease: one ingest of the source at a time
    <root>/joins/<join>/           the join: output (by event_date), quarantine, buffer, checkpoints
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from assets.specs import JoinSpec, SourceSpec

if TYPE_CHECKING:
    from joins.ingest import IngestSource
    from resources.lake import LakeResource


@dataclass(frozen=True)
class JoinLayout:
    """Absolute paths (or URIs) of every folder and Delta table of one join spec."""

    root: str
    spec: JoinSpec

    @classmethod
    def of(cls, lake: LakeResource, spec: JoinSpec) -> JoinLayout:
        return cls(lake.root_path(), spec)

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

    def ingest_source(self, source: SourceSpec) -> IngestSource:
        """The ingest engine's view of one of the spec's sources."""
        from joins.ingest import IngestSource

        is_table = source.name == self.spec.table.name
        return IngestSource(
            name=source.name, kind="table" if is_table else "stream", landing=self.landing(source),
            spec=source.landing_spec(), table=self.table(source),
            quarantine=self.quarantine(source), manifest=self.manifest(source),
            lease=self.lease(source),
            history_retention_ms=self.spec.history_retention_ms if is_table else None)

    @property
    def join_root(self) -> str:
        return self._under("joins", self.spec.name)

    @property
    def output(self) -> str:
        from assets.engine import join_paths

        return join_paths(self.join_root).output

    @property
    def join_quarantine(self) -> str:
        from assets.engine import join_paths

        return join_paths(self.join_root).quarantine

    @property
    def stream_events(self) -> str:
        return self.table(self.spec.stream)

    @property
    def table_versions(self) -> str:
        return self.table(self.spec.table)
