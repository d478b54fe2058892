"""A join asset's event-day partitions: one UTC calendar day of event time per partition, the
same day the engine writes into the output table's `event_date` column, so a Dagster partition
and a Delta partition are one and the same set of rows. Which days a code location shows (fitted
to the lake's data) is `pipelines.partitions`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from dagster import DailyPartitionsDefinition

DAY_FORMAT = "%Y-%m-%d"


def event_day_partitions(first: dt.date, last: dt.date | None = None, *,
                         today: dt.date | None = None) -> DailyPartitionsDefinition:
    """Daily UTC partitions from `first` to `last` (both included; `last` defaults to `first`)."""
    end = max(first, last or first) + dt.timedelta(days=1)
    # Dagster lists the newest partitions (what the UI plots per partition: the metadata of the
    # last 120) counting back from now, not from `end_date`, so a past end would plot only empty
    # days. An end offset of minus the days since `end` makes that list end at `end` too; every
    # other use of the partitions follows `end_date`, which it does not change.
    behind = ((today or dt.datetime.now(dt.UTC).date()) - end).days
    return DailyPartitionsDefinition(start_date=first.strftime(DAY_FORMAT),
                                     end_date=end.strftime(DAY_FORMAT), timezone="UTC",
                                     end_offset=-max(0, behind))


def day_span(days: Sequence[str]) -> str:
    """Event days (partition keys, in order) as a reader wants them in a log line or a check's
    description: the day itself, or the first .. last and how many."""
    if len(days) == 1:
        return days[0]
    return f"{days[0]} .. {days[-1]} ({len(days)} days)"
