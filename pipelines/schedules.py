"""The nightly backfill of the days late data made stale.

Late data can still change the last few event days: table updates are stored while they are
within history retention of the table's stream time, and late stream records may be joined late.
The agreement check (per event day, `pipelines/checks.py`) finds the days whose output differs
from the batch form: those are stale. Each night the schedule backfills exactly them, one run
per range of consecutive stale days (the join asset's single-run backfill policy), among the
last `backfill_horizon_days` event days.

The horizon ends at the join's *stream time* (read from the engine's batch log, no Spark), not at
the wall clock: lateness is measured in event time, and replayed or delayed data is then treated
the same as live data. When the agreement check has looked at no day of the horizon (the
staleness sensor is off and no check ran), which days are stale is unknown: the schedule then
backfills the whole horizon, as a safe default.
"""

import datetime as dt
from typing import TYPE_CHECKING

from dagster import RunRequest, ScheduleDefinition, ScheduleEvaluationContext, SkipReason, schedule

from assets.factory import MODE_BACKFILL, MODE_TAG, PipelineAssets, layout_of
from joins.core.time import day_start_ms
from pipelines.checks import stale_days
from pipelines.partitions import (
    contiguous_ranges,
    day_key,
    days_in_range,
    horizon_range,
    parse_day_key,
)
from resources import LakeResource

if TYPE_CHECKING:
    from resources.dagster_private import UnresolvedAssetJobDefinition

# Dagster's run tags for a run over a partition range (one run, BackfillPolicy.single_run()).
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def nightly_backfill_schedule(ja: PipelineAssets, job: "UnresolvedAssetJobDefinition", *,
                              horizon_days: int | None = None) -> ScheduleDefinition:
    """`<join>_nightly_backfill`: backfills the stale days among the last N event days (N = the
    spec's `backfill_horizon_days` unless `horizon_days` overrides it)."""
    spec = ja.spec
    n_days = horizon_days if horizon_days is not None else spec.backfill_horizon_days
    if n_days < 1:
        raise ValueError(f"horizon_days must be >= 1, got {n_days}")

    @schedule(name=f"{spec.name}_nightly_backfill", cron_schedule=spec.backfill_cron, job=job,
              execution_timezone="UTC",
              description=f"Backfills the event days of `{spec.name}` that late data made stale "
                          f"(the agreement check failed on them) among the last {n_days} day(s) "
                          f"ending at the join's stream time.")
    def _nightly(context: ScheduleEvaluationContext, lake: LakeResource) -> list[RunRequest] | SkipReason:
        stream_time = spec.engine(layout_of(lake, spec)).stream_time()
        basis = "the join's stream time"
        if stream_time is None:
            scheduled = context.scheduled_execution_time or dt.datetime.now(dt.UTC)
            stream_time = day_start_ms(scheduled.astimezone(dt.UTC).date())
            basis = "the schedule's date (nothing joined yet)"
        rng = horizon_range(stream_time, n_days, spec.start_date)
        horizon = [day_key(d) for d in days_in_range(parse_day_key(rng.start), parse_day_key(rng.end))
                   if ja.partitions_def.has_partition_key(day_key(d))]
        if not horizon:
            return SkipReason(f"no partition of {spec.name} in the horizon {rng.start}..{rng.end}")
        stale, checked = stale_days(context.instance, ja.join_key, horizon)
        if stale:
            which, reason = stale, "stale: the agreement check failed on them"
        elif not checked:
            which, reason = horizon, "the agreement check has not looked at these days"
        else:
            return SkipReason(f"no stale day in {horizon[0]}..{horizon[-1]}: the agreement check "
                              f"passed on {', '.join(checked)}")
        return [RunRequest(
            run_key=f"{spec.name}:nightly:{r.start}..{r.end}:st{stream_time}",
            tags={RANGE_START_TAG: r.start, RANGE_END_TAG: r.end, MODE_TAG: MODE_BACKFILL,
                  "tj/horizon_days": str(n_days), "tj/horizon_basis": basis, "tj/why": reason})
            for r in contiguous_ranges(which)]

    return _nightly
