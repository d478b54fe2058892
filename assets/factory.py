"""Pipeline spec -> Dagster assets and the micro-batch job, for any operator.

For a spec named `orders_with_rates` with inputs `orders` and `rates`:

- one asset per input (`rates`, `orders`): its Delta table, fed from its landing folder (one
  ingest run per materialization; a versioned table or an events table, as the spec says),
  and its landing folder (`assets.sources`). A source shared by many joins has these once, in
  the `sources` group, built by the code location; the join's asset only depends on it;
- `orders_with_rates`: the join output, partitioned by event day. A run of this asset over a
  partition range is a **backfill**: it recomputes those days and replaces them in one commit
  (`BackfillPolicy.single_run()`: one run for the whole range);
- `orders_with_rates_microbatch`: a job (one op) that runs the next **micro-batch**: only what
  is new since the last batch, exactly once. What it touches is known only after it ran (late
  records land on old days, a grace buffer releases records of earlier batches), so it is not
  a partitioned asset run: it reports one materialization of the join asset per event day it
  wrote to.

What runs is the spec's engine (`spec.engine(layout)`, `joins.pipeline.PipelineEngine`); this
module only translates. Resources: `spark` (resources.SparkResource), `lake` (resources.LakeResource).
"""

# No `from __future__ import annotations`: Dagster reads the ops' config annotations at runtime.
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetObservation,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    CodeReferencesMetadataValue,
    DailyPartitionsDefinition,
    JobDefinition,
    LocalFileCodeReference,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    asset,
    job,
    op,
)

from assets.metadata import (
    backfill_day_metadata,
    backfill_metadata,
    batch_metadata,
    day_metadata,
    day_share,
    settings_metadata,
    table_metadata,
)
from assets.observed import buffer_observation, observed_assets, quarantine_observation
from assets.partitions import day_span, event_day_partitions
from assets.sources import KINDS, SourceAssets, build_source_assets
from joins.pipeline import PipelineLayout, PipelineSpec, parse_pipeline_spec
from joins.pipeline.select import with_select
from resources import LakeResource, SparkResource

MODE_TAG = "tj/mode"
MODE_MICROBATCH = "microbatch"
MODE_BACKFILL = "backfill"


@dataclass(frozen=True)
class PipelineAssets:
    """Everything the factory built for one pipeline spec."""

    spec: PipelineSpec
    partitions_def: DailyPartitionsDefinition
    sources: dict[str, SourceAssets]      # input role -> its inline source (not shared ones)
    join: AssetsDefinition | AssetSpec    # AssetSpec: no batch form, written by micro-batches only
    microbatch_job: JobDefinition
    observed: tuple[AssetsDefinition, ...] = ()   # landing folders, quarantine, grace buffer

    @property
    def join_key(self) -> AssetKey:
        return AssetKey([self.spec.name])

    @property
    def assets(self) -> list[AssetsDefinition | AssetSpec]:
        return [*(s.table for s in self.sources.values()), self.join,
                *(s.landing for s in self.sources.values()), *self.observed]

    def input_asset(self, role: str) -> AssetsDefinition:
        """The ingest asset of an inline source (a shared source's is built once, apart)."""
        return self.sources[role].table

    @property
    def microbatch_job_name(self) -> str:
        return microbatch_job_name(self.spec)


def microbatch_job_name(spec: PipelineSpec) -> str:
    return f"{spec.name}_microbatch"


def layout_of(lake: LakeResource, spec: PipelineSpec) -> PipelineLayout:
    return lake.layout(spec)


def _spec_metadata(spec: PipelineSpec, spec_file: str | None) -> dict[str, Any]:
    """The spec's settings, and where it is written (the UI's "source" link), when a file."""
    metadata: dict[str, Any] = settings_metadata(with_select(spec.settings(), spec.select))
    if spec_file is not None:
        kind = "SQL" if spec_file.endswith(".sql") else "YAML"
        metadata["spec_file"] = MetadataValue.path(spec_file)
        metadata["dagster/code_references"] = CodeReferencesMetadataValue(code_references=[
            LocalFileCodeReference(file_path=spec_file, label=f"pipeline spec ({kind})")])
    return metadata


def _join_asset(spec: PipelineSpec, partitions_def: DailyPartitionsDefinition,
                spec_file: str | None = None) -> AssetsDefinition | AssetSpec:
    metadata = _spec_metadata(spec, spec_file)
    if not spec.has_batch_form:
        # Nothing to run but its micro-batches (which report its materializations): an asset
        # the UI offers no Materialize or backfill for, rather than one that can only fail.
        return AssetSpec(
            spec.name, group_name=spec.name, kinds=KINDS, partitions_def=partitions_def,
            deps=[AssetKey([i.name]) for i in spec.pipeline_inputs()],
            metadata=metadata,
            description=(spec.description or spec.summary()) + (
                " Written by its micro-batches only: it has no batch form, so there is nothing "
                "to materialize or backfill by hand."))
    description = (spec.description or spec.summary()) + (
        " Partitioned by event day; a run over a range of days is a backfill that replaces "
        "exactly those days in one commit.")

    @asset(name=spec.name, group_name=spec.name, kinds=KINDS, description=description,
           partitions_def=partitions_def, backfill_policy=BackfillPolicy.single_run(),
           deps=[AssetKey([i.name]) for i in spec.pipeline_inputs()],
           metadata=metadata)
    def _join(context: AssetExecutionContext, spark: SparkResource,
              lake: LakeResource) -> MaterializeResult:
        from joins import lake as delta

        engine = spec.engine(layout_of(lake, spec))
        days = list(context.partition_keys)
        context.log.info(f"backfill of event day(s) {day_span(days)}")
        report = engine.backfill(spark.session_for(context), days)
        context.log.info(f"backfill: {report.rows_out} rows out; {report.rows_removed} removed, "
                         f"{report.rows_changed} changed, {report.rows_added} new")
        output = engine.layout.output
        schema = delta.table_schema(output) if delta.table_exists(output) else None
        # What the run did goes on every partition; each day's counts only on that day's.
        context.add_asset_metadata({
            **backfill_metadata(report, output_path=output, stream_time=engine.stream_time()),
            **table_metadata(None, schema)})
        for day in days:
            if day in report.per_day:
                context.add_asset_metadata(backfill_day_metadata(day, report.per_day[day]),
                                           partition_key=day)
        return MaterializeResult(tags={MODE_TAG: MODE_BACKFILL})

    return _join


def _microbatch_job(spec: PipelineSpec) -> JobDefinition:
    join_key = AssetKey([spec.name])

    @op(name=f"{spec.name}_microbatch_step", out={}, tags={"kind": "spark"},
        description="Run the join's next micro-batch (exactly once) and report a materialization "
                    "of every event day it wrote to.")
    def _step(context: OpExecutionContext, spark: SparkResource,
              lake: LakeResource) -> Iterator[AssetMaterialization | AssetObservation]:
        from joins import lake as delta
        from joins.pipeline import observe

        layout = layout_of(lake, spec)
        engine = spec.engine(layout)
        session = spark.session_for(context)
        r = engine.microbatch(session)
        if r.skipped:
            context.log.info(f"micro-batch skipped: {r.skip_reason}")
            yield AssetObservation(asset_key=join_key, metadata={
                "mode": "micro-batch", "skipped": r.skip_reason or "nothing new"})
            return
        counters = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in r.counters.items() if n)
        context.log.info(
            f"micro-batch {r.batch_id}: {r.rows_in_total} rows in "
            f"({', '.join(f'{n} {role}' for role, n in r.rows_in.items())}), {r.rows_out} rows out"
            + (f", {counters}" if counters else "")
            + f"; event days {list(r.event_days_touched)}; {sum(r.timings.values()):.2f} s")
        progress = observe.progress(layout, r.stream_time)
        metadata = {**batch_metadata(r, output_path=layout.output, progress=progress),
                    **table_metadata(None, delta.table_schema(layout.output)
                                     if delta.table_exists(layout.output) else None)}
        # Each day's materialization carries that day's rows (written now, and in total, from
        # the output's Delta log: no Spark job) and which batch wrote them; the batch's own
        # numbers go once into an observation, so plots per day or per event do not repeat them.
        written = observe.batch_day_rows(layout, r.output_version)
        rows_now = observe.day_rows(layout) if r.event_days_touched else {}
        shared = day_share(metadata)
        for day in r.event_days_touched:
            yield AssetMaterialization(
                asset_key=join_key, partition=day, tags={MODE_TAG: MODE_MICROBATCH},
                metadata={**day_metadata(day, written=written.get(day), rows_now=rows_now.get(day)),
                          **shared})
        yield AssetObservation(asset_key=join_key, metadata=metadata)
        held = buffer_observation(layout, r.stream_time)
        if held is not None:
            yield held
        if r.quarantined:
            yield quarantine_observation(session, layout)

    @job(name=microbatch_job_name(spec), tags={MODE_TAG: MODE_MICROBATCH},
         description=f"Micro-batch of {spec.name}: processes only what is new, exactly once.")
    def _job() -> None:
        _step()

    return _job


def build_pipeline_assets(spec: PipelineSpec | dict,  # type: ignore[type-arg]
                          partitions_def: DailyPartitionsDefinition | None = None, *,
                          shared: frozenset[str] = frozenset(),
                          spec_file: str | None = None) -> PipelineAssets:
    """The assets and the micro-batch job of one pipeline spec (ConfigError for a bad spec).
    `partitions_def`: the join's event days (default: the spec's `start_date` alone; the code
    location passes the days the lake has data for, `pipelines.partitions.fitted_partitions`).
    `shared`: the sources defined apart (`joins.pipeline.shared`): no asset of them here.
    `spec_file`: the file the spec was read from (linked from the join asset's page)."""
    spec = parse_pipeline_spec(spec)
    partitions_def = partitions_def or event_day_partitions(spec.start_date)
    join = _join_asset(spec, partitions_def, spec_file)
    return PipelineAssets(
        spec=spec, partitions_def=partitions_def,
        sources={i.role: build_source_assets(i, group=spec.name, readers=(spec,))
                 for i in spec.pipeline_inputs() if i.source is not None and i.name not in shared},
        join=join, microbatch_job=_microbatch_job(spec),
        observed=tuple(observed_assets(spec, join.key)))
