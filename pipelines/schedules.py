"""The nightly backfill of the late-data horizon.

Late data can still change the last few event days: table updates are stored while they are
within history retention of the table's stream time, and late stream records may be joined late.
Each night the schedule re-computes the last `backfill_horizon_days` event days in one run (the
join asset's single-run backfill policy), so the output converges to the batch result.

The horizon ends at the join's *stream time* (read from the latest materialization's metadata),
not at the wall clock: lateness is measured in event time, and replayed or delayed data is then
treated the same as live data. Before the first materialization it ends at the schedule's date.
"""

import datetime as dt
from typing import TYPE_CHECKING

from dagster import RunRequest, ScheduleDefinition, ScheduleEvaluationContext, SkipReason, schedule

from assets.factory import MODE_BACKFILL, MODE_TAG, PipelineAssets
from assets.metadata import STREAM_TIME, metadata_int
from pipelines.partitions import day_key, day_start_ms, horizon_range, parse_day_key

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

# Dagster's run tags for a run over a partition range (one run, BackfillPolicy.single_run()).
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def nightly_backfill_schedule(ja: PipelineAssets, job: "UnresolvedAssetJobDefinition", *,
                              horizon_days: int | None = None) -> ScheduleDefinition:
    """`<join>_nightly_backfill`: one run over the last N event days (N = the spec's
    `backfill_horizon_days` unless `horizon_days` overrides it)."""
    spec = ja.spec
    days = horizon_days if horizon_days is not None else spec.backfill_horizon_days
    if days < 1:
        raise ValueError(f"horizon_days must be >= 1, got {days}")

    @schedule(name=f"{spec.name}_nightly_backfill", cron_schedule=spec.backfill_cron, job=job,
              execution_timezone="UTC",
              description=f"Backfills the last {days} event day(s) of `{spec.name}` (the late-data "
                          f"horizon), ending at the join's stream time.")
    def _nightly(context: ScheduleEvaluationContext) -> RunRequest | SkipReason:
        event = context.instance.get_latest_materialization_event(ja.join_key)
        materialization = event.asset_materialization if event is not None else None
        stream_time = metadata_int(materialization.metadata, STREAM_TIME) if materialization else None
        basis = "the join's stream time"
        if stream_time is None:
            scheduled = context.scheduled_execution_time or dt.datetime.now(dt.UTC)
            stream_time = day_start_ms(scheduled.astimezone(dt.UTC).date())
            basis = "the schedule's date (nothing materialized yet)"
        rng = horizon_range(stream_time, days, spec.start_date)
        last_key = ja.partitions_def.get_last_partition_key()
        if last_key is None or parse_day_key(rng.start) > parse_day_key(last_key):
            return SkipReason(f"no partition of {spec.name} in the horizon {rng.start}..{rng.end}")
        end = min(parse_day_key(rng.end), parse_day_key(last_key))
        return RunRequest(
            run_key=f"{spec.name}:nightly:{rng.start}..{day_key(end)}:st{stream_time}",
            tags={RANGE_START_TAG: rng.start, RANGE_END_TAG: day_key(end),
                  MODE_TAG: MODE_BACKFILL, "tj/horizon_days": str(days), "tj/horizon_basis": basis})

    return _nightly
