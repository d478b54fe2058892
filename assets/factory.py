"""Join spec -> Dagster assets: the versioned table, the stream events, and their join.

For a spec named `orders_with_rates` with sources `orders` (stream) and `rates` (table):

- `rates`: the versioned Delta table, fed from its landing folder (one ingest batch per run);
- `orders`: the stream events Delta table, fed from its landing folder;
- `orders_with_rates`: the join output, partitioned by event day. A run of this asset over a
  partition range is a **backfill**: it recomputes those days from the full history and replaces
  them in one commit (`BackfillPolicy.single_run()`: one run for the whole range);
- `orders_with_rates_microbatch`: a job (one op) that runs the next **micro-batch**: only what
  is new since the last batch, exactly once. What it touches is known only after it ran (late
  records land on old days, the grace buffer releases records of earlier batches), so it is not
  a partitioned asset run: it reports one materialization of the join asset per event day it
  wrote to, with the batch's metadata.

Resources: `spark` (resources.SparkResource) and `lake` (resources.LakeResource).
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetObservation,
    AssetsDefinition,
    BackfillPolicy,
    Config,
    DailyPartitionsDefinition,
    JobDefinition,
    MaterializeResult,
    OpExecutionContext,
    asset,
    job,
    op,
)
from pydantic import Field

from assets import engine
from assets.layout import JoinLayout
from assets.metadata import backfill_metadata, ingest_metadata, microbatch_metadata
from assets.specs import JoinSpec, SourceSpec, parse_join_spec
from joins.ingest import SourceKind, run_ingest
from pipelines.partitions import event_day_partitions
from resources import LakeResource, SparkResource

MODE_TAG = "tj/mode"
MODE_MICROBATCH = "microbatch"
MODE_BACKFILL = "backfill"
KINDS = {"spark", "delta"}


class IngestConfig(Config):
    """Which landing files to ingest; empty = every landed file no batch has taken yet."""

    files: list[str] = Field(default_factory=list,
                             description="landing file names (the sensor passes the new ones)")
    wait_s: float = Field(default=300.0, ge=0,
                          description="how long to wait for another ingest of the source to "
                                      "finish before failing the run (one ingest at a time)")


@dataclass(frozen=True)
class JoinAssets:
    """Everything the factory built for one join spec."""

    spec: JoinSpec
    partitions_def: DailyPartitionsDefinition
    table: AssetsDefinition
    stream: AssetsDefinition
    join: AssetsDefinition
    microbatch_job: JobDefinition

    @property
    def join_key(self) -> AssetKey:
        return AssetKey([self.spec.name])

    @property
    def assets(self) -> list[AssetsDefinition]:
        return [self.table, self.stream, self.join]

    def source_asset(self, source: SourceSpec) -> AssetsDefinition:
        return self.table if source.name == self.spec.table.name else self.stream

    @property
    def microbatch_job_name(self) -> str:
        return microbatch_job_name(self.spec)


def microbatch_job_name(spec: JoinSpec) -> str:
    return f"{spec.name}_microbatch"


def _ingest_asset(spec: JoinSpec, source: SourceSpec, kind: SourceKind) -> AssetsDefinition:
    what = "versioned table" if kind == "table" else "stream events"
    description = (source.description or
                   f"The {what} `{source.name}` (Delta), fed from its landing folder "
                   f"({source.format} files, key {source.key_column!r}, event time {source.ts_column!r}).")

    @asset(name=source.name, group_name=spec.name, kinds=KINDS, description=description,
           output_required=False,
           metadata={"source_kind": what, "format": source.format,
                     "on_bad_record": source.on_bad_record})
    def _ingest(context: AssetExecutionContext, config: IngestConfig, spark: SparkResource,
                lake: LakeResource) -> Iterator[MaterializeResult]:
        layout = JoinLayout.of(lake, spec)
        summaries = run_ingest(
            spark.get_session(), layout.ingest_source(source), requested=config.files,
            wait_s=config.wait_s,
            on_wait=lambda holder: context.log.info(
                f"waiting up to {config.wait_s:.0f} s for another ingest of {source.name}: "
                f"{holder.describe(int(time.time() * 1000))}"))
        if not summaries:
            # Nothing changed, so nothing is materialized (the join's sensor sees no new version).
            context.log.info(f"no new files in {layout.landing(source)}")
            return
        for s in summaries:
            context.log.info(
                f"{source.name} batch {s.batch_id}: {s.rows_in} rows in = {s.stored} stored + "
                f"{s.expired} expired + {s.quarantined} quarantined"
                + (f" (files quarantined whole: {list(s.bad_files)})" if s.bad_files else "")
                + (" (already committed)" if s.skipped else ""))
        yield MaterializeResult(metadata=ingest_metadata(
            summaries, table_path=layout.table(source), quarantine_path=layout.quarantine(source),
            landing=layout.landing(source)))

    return _ingest


def _join_asset(spec: JoinSpec, partitions_def: DailyPartitionsDefinition) -> AssetsDefinition:
    description = (spec.description or
                   f"`{spec.stream.name}` enriched with the `{spec.table.name}` version valid at each "
                   f"event's time ({spec.join} join). Partitioned by event day; a run over a range "
                   f"of days is a backfill that replaces exactly those days in one commit.")

    @asset(name=spec.name, group_name=spec.name, kinds=KINDS, description=description,
           partitions_def=partitions_def, backfill_policy=BackfillPolicy.single_run(),
           deps=[AssetKey([spec.table.name]), AssetKey([spec.stream.name])],
           metadata={"join": spec.join, "grace_ms": spec.grace_ms if spec.grace_ms is not None else -1,
                     "late": spec.late, "history_retention_ms": spec.history_retention_ms})
    def _join(context: AssetExecutionContext, spark: SparkResource,
              lake: LakeResource) -> MaterializeResult:
        layout = JoinLayout.of(lake, spec)
        session = spark.get_session()
        days = list(context.partition_keys)
        context.log.info(f"backfill of {len(days)} event day(s): {days[0]} .. {days[-1]}")
        report = engine.join_backfill(session, spec, join_root=layout.join_root,
                                      stream_source=layout.stream_events,
                                      table_source=layout.table_versions, days=days)
        stream_time, _ = engine.join_stream_time(session, join_root=layout.join_root)
        context.log.info(f"backfill: {report.rows_out} rows out; {report.rows_removed} replaced, "
                         f"{report.rows_added} new")
        return MaterializeResult(metadata=backfill_metadata(report, output_path=layout.output,
                                                            stream_time=stream_time),
                                 tags={MODE_TAG: MODE_BACKFILL})

    return _join


def _microbatch_job(spec: JoinSpec, partitions_def: DailyPartitionsDefinition) -> JobDefinition:
    join_key = AssetKey([spec.name])

    @op(name=f"{spec.name}_microbatch_step", out={}, tags={"kind": "spark"},
        description="Run the join's next micro-batch (exactly once) and report a materialization "
                    "of every event day it wrote to.")
    def _step(context: OpExecutionContext, spark: SparkResource,
              lake: LakeResource) -> Iterator[AssetMaterialization | AssetObservation]:
        layout = JoinLayout.of(lake, spec)
        r = engine.join_microbatch(spark.get_session(), spec, join_root=layout.join_root,
                                   stream_source=layout.stream_events,
                                   table_source=layout.table_versions)
        if r.skipped:
            context.log.info(f"micro-batch skipped: {r.skip_reason}")
            yield AssetObservation(asset_key=join_key, metadata={
                "mode": "micro-batch", "skipped": r.skip_reason or "nothing new"})
            return
        context.log.info(
            f"micro-batch {r.batch_id}: {r.rows_in_stream} stream rows + {r.rows_in_table or 0} "
            f"table rows in, {r.rows_out} rows out, {r.late_joined} late joined, "
            f"{r.late_dropped} late dropped, {r.quarantined} quarantined, {r.still_buffered} "
            f"still buffered; event days {list(r.event_days_touched)}")
        metadata = microbatch_metadata(r, output_path=layout.output,
                                       output_version=engine.delta_version(layout.output))
        outside = [d for d in r.event_days_touched if not partitions_def.has_partition_key(d)]
        if outside:
            context.log.warning(f"event days {outside} are outside the partitions of {spec.name} "
                                f"(start_date {spec.start_date}); their rows are in the table but "
                                f"cannot be selected for a backfill")
        days = [d for d in r.event_days_touched if d not in outside]
        for day in days:
            yield AssetMaterialization(asset_key=join_key, partition=day, metadata=metadata,
                                       tags={MODE_TAG: MODE_MICROBATCH})
        if not days:
            # A batch that only filled the grace buffer still happened: record it.
            yield AssetObservation(asset_key=join_key, metadata=metadata)

    @job(name=microbatch_job_name(spec), tags={MODE_TAG: MODE_MICROBATCH},
         description=f"Micro-batch of {spec.name}: processes only what is new, exactly once.")
    def _job() -> None:
        _step()

    return _job


def build_join_assets(spec: JoinSpec | dict[str, Any]) -> JoinAssets:
    """The assets and the micro-batch job of one join spec (a ConfigError for a bad spec)."""
    spec = parse_join_spec(spec)
    partitions_def = event_day_partitions(spec.start_date)
    return JoinAssets(
        spec=spec, partitions_def=partitions_def,
        table=_ingest_asset(spec, spec.table, "table"),
        stream=_ingest_asset(spec, spec.stream, "stream"),
        join=_join_asset(spec, partitions_def),
        microbatch_job=_microbatch_job(spec, partitions_def))
