"""Event days (joins.core.time): the UTC day of an event time, the same in Python and in Spark's
partition column (tests/spark/test_human_times.py holds the Spark twin to it)."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from joins.core.time import DAY_MS, day_of, day_start_ms, event_day

EPOCH_MS = st.integers(-62_135_596_800_000, 253_402_300_799_999)


@given(EPOCH_MS)
def test_the_event_day_is_the_utc_date(ts: int) -> None:
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ts)
    assert day_of(ts) == stamp.date()
    assert event_day(ts) == stamp.date().isoformat()
    assert day_start_ms(day_of(ts)) <= ts < day_start_ms(day_of(ts)) + DAY_MS
