"""Event-day partitions of a join asset, and the day arithmetic the sensors and schedules share.

A partition is one UTC calendar day of *event time* (the stream record's `ts`), the same day the
engine writes into the output table's `event_date` column, so a Dagster partition and a Delta
partition are one and the same set of rows.
"""

from __future__ import annotations

import datetime as dt

from dagster import DailyPartitionsDefinition, PartitionKeyRange

DAY_MS = 86_400_000
DAY_FORMAT = "%Y-%m-%d"


def event_day_partitions(start_date: dt.date) -> DailyPartitionsDefinition:
    """Daily UTC partitions from `start_date`; `end_offset=1` keeps today's (still open) day
    selectable, since micro-batches write into it before it is over."""
    return DailyPartitionsDefinition(start_date=start_date.strftime(DAY_FORMAT), timezone="UTC",
                                     end_offset=1)


def day_of(ts_ms: int) -> dt.date:
    """The UTC event day of an event time in ms."""
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ts_ms)).date()


def day_key(day: dt.date) -> str:
    return day.strftime(DAY_FORMAT)


def parse_day_key(key: str) -> dt.date:
    return dt.datetime.strptime(key, DAY_FORMAT).date()


def day_start_ms(day: dt.date) -> int:
    return (day - dt.date(1970, 1, 1)).days * DAY_MS


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
