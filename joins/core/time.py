"""Event days: the one rule every layer uses to cut event time into days.

An event day is a UTC calendar day of event time (epoch ms). It is the Delta partition of every
output (`event_date`), the Dagster partition of every join asset, and the unit of backfills, so
the engine, the checks and the schedule must agree on it to the millisecond: this module and
its Spark twin (`joins.spark.exprs.event_date`) are its only definitions.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import BeforeValidator, Field, StrictInt

from joins.core.human import parse_duration

DAY_MS = 86_400_000
# A spec's duration (grace, history retention, lag): Spark computes with it in 64-bit longs, where
# a larger number would fail a batch (or change the column's type) that the reference, on
# Python's integers, runs.
MAX_DURATION_MS = 2**63 - 1


def _spelled_duration(value: object) -> object:
    # A spec may spell a duration as the UI shows it (`30 min`, `2 days 6 h`); any other value
    # goes to the strict integer check unchanged (no float, bool or digit string coerced).
    return parse_duration(value) if isinstance(value, str) else value


DurationMs = Annotated[StrictInt, BeforeValidator(_spelled_duration),
                       Field(ge=0, le=MAX_DURATION_MS)]
_EPOCH_DAY = dt.date(1970, 1, 1)


def day_of(ts_ms: int) -> dt.date:
    """The UTC event day of an event time in ms."""
    return _EPOCH_DAY + dt.timedelta(days=ts_ms // DAY_MS)


def event_day(ts_ms: int) -> str:
    """The UTC event day of an event time in ms, as `YYYY-MM-DD`."""
    return day_of(ts_ms).isoformat()


def day_start_ms(day: dt.date) -> int:
    """The first millisecond of a UTC event day."""
    return (day - _EPOCH_DAY).days * DAY_MS
