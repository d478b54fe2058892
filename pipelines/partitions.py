"""Event-day partitions fitted to a join's data, and the day arithmetic the sensors and
schedules share (the partitions definition itself: `assets.partitions`).

A partition is one UTC calendar day of *event time* (the stream record's `ts`), the same day the
engine writes into the output table's `event_date` column, so a Dagster partition and a Delta
partition are one and the same set of rows.

The partitions fit the data (`fitted_partitions`): they start at the first event day with output
or with input events (a join added over existing data covers its first day, even one that
joined nothing) and end at the day of the join's stream time, read from the lake when the code location loads
(Delta logs and the batch log, no Spark). Dagster partitions are fixed while a code location is
loaded, so as stream time reaches a new day the location is reloaded (the live demo does it; in
the UI: Deployment -> Reload). Before any data, the one partition is the spec's `start_date`.
"""

from __future__ import annotations

import datetime as dt
import logging

from dagster import DailyPartitionsDefinition, PartitionKeyRange

from assets.partitions import DAY_FORMAT, event_day_partitions
from joins.core.time import day_of
from joins.pipeline import PipelineLayout
from joins.pipeline.observe import data_days

log = logging.getLogger(__name__)

# Ten years of daily partitions: more is most likely a misread event time (said, not refused).
MANY_DAYS = 3_660


def fitted_partitions(layout: PipelineLayout) -> DailyPartitionsDefinition:
    """The event days the pipeline has data for (output days up to the join's stream time); the
    spec's `start_date` alone before anything was joined, or when the lake cannot be read (a
    code location must load even when its storage is down: the error is logged)."""
    spec = layout.spec
    try:
        days = data_days(layout, spec.engine(layout).stream_time())
    except Exception as exc:  # any storage error: fall back, and say so
        log.warning("%s: cannot read the lake at %s for the partitions (%s); using start_date %s",
                    spec.name, layout.root, exc, spec.start_date)
        days = None
    if days is None:
        return event_day_partitions(spec.start_date)
    first, last = parse_day_key(days[0]), parse_day_key(days[1])
    span = (last - first).days + 1
    if span > MANY_DAYS:
        # Not refused: the days hold data. But a ts in seconds, or one near 0, reads as a day of
        # 1970 and gives the UI tens of thousands of partitions, which nobody meant.
        log.warning("%s: %d event-day partitions, from %s to %s; if %s is not a day of your data, "
                    "look for an event time near 0 or in seconds (ts is epoch milliseconds) in "
                    "its inputs or output", spec.name, span, days[0], days[1], days[0])
    return event_day_partitions(first, last)


def day_key(day: dt.date) -> str:
    return day.strftime(DAY_FORMAT)


def parse_day_key(key: str) -> dt.date:
    return dt.datetime.strptime(key, DAY_FORMAT).date()


def days_in_range(first: dt.date, last: dt.date) -> list[dt.date]:
    """Every day from `first` to `last`, both included (empty when first > last)."""
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def horizon_range(stream_time_ms: int, horizon_days: int, start_date: dt.date) -> PartitionKeyRange:
    """The last `horizon_days` event days ending at the day of `stream_time_ms`, clipped to the
    first partition: the days late data may still change."""
    last = day_of(stream_time_ms)
    first = max(start_date, last - dt.timedelta(days=horizon_days - 1))
    if last < first:
        last = first
    return PartitionKeyRange(day_key(first), day_key(last))


def most_recent_complete_day(stream_time_ms: int, grace_ms: int | None) -> dt.date:
    """The latest event day whose stream records have all left the grace buffer: every ts of the
    day is below stream time - grace, so a micro-batch can add no more in-grace rows to it."""
    # Day D is complete iff start(D + 1) <= stream time - grace, i.e. D + 1 <= day_of(bound).
    return day_of(stream_time_ms - (grace_ms or 0)) - dt.timedelta(days=1)


def late_data_days(stream_time_ms: int, late_horizon_ms: int,
                   partitions: DailyPartitionsDefinition) -> list[str]:
    """The event days late data can still change (from the day of stream time - the late-data
    horizon to the day of stream time), those of them that are partitions."""
    days = days_in_range(day_of(max(0, stream_time_ms - late_horizon_ms)), day_of(stream_time_ms))
    return [day_key(d) for d in days if partitions.has_partition_key(day_key(d))]


def contiguous_ranges(days: list[str]) -> list[PartitionKeyRange]:
    """Sorted day keys grouped into runs of consecutive days."""
    out: list[PartitionKeyRange] = []
    for key in sorted(days):
        if out and parse_day_key(out[-1].end) + dt.timedelta(days=1) == parse_day_key(key):
            out[-1] = PartitionKeyRange(out[-1].start, key)
        else:
            out.append(PartitionKeyRange(key, key))
    return out
