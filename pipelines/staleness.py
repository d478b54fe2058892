"""The staleness sensor: after micro-batches wrote, run the agreement check over the event days
late data can still change, so a day that late data made stale shows up in the UI soon after.

`<join>_staleness_sensor`: cursor = the event id of the join's newest materialization the check
has seen. A newer micro-batch materialization -> one run of the checks job over the late-data
horizon (ending at the join's stream time, clipped to the loaded partitions); a newer backfill
needs none (the backfill job runs the check on its days); no run while one is queued or running.
It evaluates at most every `check_interval_s`: each run is a Spark job over the horizon.
"""

from typing import TYPE_CHECKING

from dagster import (
    AssetRecordsFilter,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from assets.factory import MODE_BACKFILL, MODE_TAG, PipelineAssets, layout_of
from pipelines.partitions import late_data_days
from pipelines.schedules import RANGE_END_TAG, RANGE_START_TAG
from pipelines.sensors import active_run
from resources import LakeResource

if TYPE_CHECKING:
    from resources.dagster_private import UnresolvedAssetJobDefinition

MODE_CHECK = "check"


def staleness_sensor(pa: PipelineAssets, checks_job: "UnresolvedAssetJobDefinition") -> SensorDefinition:
    spec = pa.spec

    @sensor(name=f"{spec.name}_staleness_sensor", job=checks_job,
            minimum_interval_seconds=spec.check_interval_s,
            description=f"Runs the agreement check of `{spec.name}` over the event days late data "
                        f"can still change, after micro-batches wrote to them: stale days show "
                        f"as failed partitions of the check.")
    def _staleness(context: SensorEvaluationContext, lake: LakeResource) -> RunRequest | SkipReason:
        found = context.instance.fetch_materializations(
            AssetRecordsFilter(asset_key=pa.join_key), limit=1).records
        if not found:
            return SkipReason(f"nothing materialized {spec.name} yet")
        latest = found[0]
        if context.cursor == str(latest.storage_id):
            return SkipReason(f"no materialization of {spec.name} since the last check (event "
                              f"{latest.storage_id})")
        event = latest.asset_materialization
        if event is not None and (event.tags or {}).get(MODE_TAG) == MODE_BACKFILL:
            context.update_cursor(str(latest.storage_id))
            return SkipReason("the latest materialization is a backfill, whose run checked its days")
        running = active_run(context, checks_job.name)
        if running is not None:
            return SkipReason(f"check run {running.run_id[:8]} is still in progress")
        stream_time = spec.engine(layout_of(lake, spec)).stream_time()
        if stream_time is None:
            return SkipReason(f"{spec.name} has no stream time yet (no micro-batch done)")
        days = late_data_days(stream_time, spec.late_horizon_ms, pa.partitions_def)
        if not days:
            return SkipReason(f"no partition of {spec.name} within the late-data horizon; reload "
                              f"the code location to extend the partitions")
        context.update_cursor(str(latest.storage_id))
        return RunRequest(
            run_key=f"{spec.name}:agreement:{latest.storage_id}",
            tags={RANGE_START_TAG: days[0], RANGE_END_TAG: days[-1], MODE_TAG: MODE_CHECK})

    return _staleness
