"""A source's assets: its table (fed from its landing folder by ingest runs) and the landing
folder itself (an observable asset). A source declared inline by one pipeline lives in that
pipeline's group; a source shared by many joins (`joins.pipeline.shared`) in the `sources`
group, built once whichever joins read it.
"""

# No `from __future__ import annotations`: Dagster reads the ops' config annotations at runtime.
import time
from collections.abc import Iterator
from dataclasses import dataclass

from dagster import (
    AssetExecutionContext,
    AssetObservation,
    AssetsDefinition,
    AssetSpec,
    Config,
    MaterializeResult,
    ObserveResult,
    OpExecutionContext,
    asset,
    multi_observable_source_asset,
)
from pydantic import Field

from assets.metadata import ingest_metadata, table_metadata
from assets.observed import (
    landing_key,
    landing_metadata,
    landing_observation,
    landing_version,
    quarantine_observation,
)
from joins.pipeline import PipelineInput, PipelineSpec
from joins.pipeline.observe import landing_status
from resources import LakeResource, SparkResource

SOURCES_GROUP = "sources"
KINDS = {"spark", "delta"}
_STORED_AS = {"versioned": "versioned table", "events": "events table", "changelog": "changelog table"}


class IngestConfig(Config):
    """Which landing files to ingest; empty = every landed file no batch has taken yet."""

    files: list[str] = Field(default_factory=list,
                             description="landing file names (the sensor passes the new ones)")
    wait_s: float = Field(default=60.0, ge=0,
                          description="how long to wait for a running ingest of the same source")


@dataclass(frozen=True)
class SourceAssets:
    """A source's table asset (its ingest) and its landing folder's observable asset."""

    item: PipelineInput
    table: AssetsDefinition
    landing: AssetsDefinition
    readers: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        assert self.item.source is not None
        return self.item.source.name


def build_source_assets(item: PipelineInput, *, group: str,
                        readers: tuple[PipelineSpec, ...]) -> SourceAssets:
    """`readers`: the pipelines that read the source (their quarantine views show its rows)."""
    names = tuple(r.name for r in readers)
    return SourceAssets(item, _ingest_asset(item, group, readers), _landing_asset(item, group), names)


def _ingest_asset(item: PipelineInput, group: str,
                  readers: tuple[PipelineSpec, ...]) -> AssetsDefinition:
    source = item.source
    assert source is not None
    what = _STORED_AS[item.kind]
    description = (source.description or
                   f"The {what} `{source.name}` (Delta), fed from its landing folder "
                   f"({source.format} files, key {source.key_column!r}, event time {source.ts_column!r}).")
    names = [r.name for r in readers]
    if len(names) > 1:
        description += f" Read by {', '.join(f'`{n}`' for n in names)}."

    @asset(name=source.name, group_name=group, kinds=KINDS, description=description,
           output_required=False, deps=[landing_key(item)],
           metadata={"source_kind": what, "format": source.format,
                     "on_bad_record": source.on_bad_record,
                     "read_by": ", ".join(names)})
    def _ingest(context: AssetExecutionContext, config: IngestConfig, spark: SparkResource,
                lake: LakeResource) -> Iterator[MaterializeResult | AssetObservation]:
        from joins import lake as delta
        from joins.ingest import run_ingest

        layout = lake.sources()
        session = spark.session_for(context)
        summaries = run_ingest(
            session, layout.ingest_source(item), requested=config.files,
            wait_s=config.wait_s,
            on_wait=lambda holder: context.log.info(
                f"waiting up to {config.wait_s:.0f} s for another ingest of {source.name}: "
                f"{holder.describe(int(time.time() * 1000))}"),
            on_takeover=lambda _holder, message: context.log.warning(message))
        yield landing_observation(layout, item)
        if not summaries:
            # Nothing changed, so nothing is materialized (the joins' sensors see no new version).
            context.log.info(f"no new files in {layout.landing(source)}")
            return
        for s in summaries:
            context.log.info(
                f"{source.name} batch {s.batch_id}: {s.rows_in} rows in = {s.stored} stored + "
                f"{s.expired} expired + {s.quarantined} quarantined"
                + (f" (files quarantined whole: {list(s.bad_files)})" if s.bad_files else "")
                + (" (already committed)" if s.skipped else ""))
        if any(s.quarantined for s in summaries):
            for reader in readers:
                yield quarantine_observation(session, lake.layout(reader))
        table = layout.table(source)
        yield MaterializeResult(metadata={
            **ingest_metadata(summaries, table_path=table, quarantine_path=layout.quarantine(source),
                              landing=layout.landing(source)),
            **table_metadata(delta.table_summary(table),
                             delta.table_schema(table) if delta.table_exists(table) else None)})

    return _ingest


def _landing_asset(item: PipelineInput, group: str) -> AssetsDefinition:
    key = landing_key(item)
    assert item.source is not None

    @multi_observable_source_asset(
        name=f"{item.source.name}_observe_landing", group_name=group,
        required_resource_keys={"lake"},
        specs=[AssetSpec(key, kinds={"files"},
                         description=f"The landing folder of `{item.source.name}` "
                                     f"({item.source.format} files).")])
    def _landing(context: OpExecutionContext) -> Iterator[ObserveResult]:
        status = landing_status(context.resources.lake.sources(), item)
        yield ObserveResult(asset_key=key, metadata=landing_metadata(status),
                            data_version=landing_version(status))

    return _landing
