"""One ingest run of a source: landing files not taken yet -> the source's Delta table.

Plain Python over the engine adapter (no Dagster here), so the asset, the demo and the tests
share one implementation. Exactly once across crashes and retries, via the write-ahead manifest
(`assets.manifest`): a planned batch whose commit did not land is re-run first, with its own
files and batch id, before anything new is planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from assets import engine
from assets.engine import IngestSummary
from assets.layout import JoinLayout
from assets.manifest import IngestManifest, pending_files
from assets.specs import SourceSpec
from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SourceKind = Literal["table", "stream"]


def run_ingest(spark: SparkSession, layout: JoinLayout, source: SourceSpec, kind: SourceKind, *,
               requested: Sequence[str] = ()) -> list[IngestSummary]:
    """Ingest the requested landing files (all landed ones when none are named) that no batch has
    taken yet. Returns one summary per batch run (none: nothing new)."""
    folder = layout.landing(source)
    landed = engine.list_landing(folder)
    missing = sorted(set(requested) - set(landed))
    if missing:
        raise ConfigError(f"{source.name}: config.files names file(s) not in the landing folder "
                          f"{folder}: {missing}")
    manifest = IngestManifest(spark, layout.manifest(source), source_id=source.name)
    target = layout.table(source)
    summaries: list[IngestSummary] = []
    last, planned = manifest.state()
    committed = engine.txn_version(target, source.name)
    if last is not None and (committed is None or committed < last.batch_id):
        summaries.append(_ingest_batch(spark, layout, source, kind, last.batch_id, last.files))
    todo = pending_files(landed, planned, list(requested))
    if todo:
        batch_id = 0 if last is None else last.batch_id + 1
        manifest.plan(batch_id, todo)
        summaries.append(_ingest_batch(spark, layout, source, kind, batch_id, tuple(todo)))
    return summaries


def _ingest_batch(spark: SparkSession, layout: JoinLayout, source: SourceSpec, kind: SourceKind,
                  batch_id: int, names: Sequence[str]) -> IngestSummary:
    folder = layout.landing(source)
    files = [f"{folder}/{name}" for name in names]
    if kind == "table":
        return engine.ingest_table_batch(
            spark, source, files, versions_path=layout.table(source),
            quarantine_path=layout.quarantine(source), batch_id=batch_id,
            history_retention_ms=layout.spec.history_retention_ms)
    return engine.ingest_stream_batch(spark, source, files, events_path=layout.table(source),
                                      quarantine_path=layout.quarantine(source), batch_id=batch_id)
