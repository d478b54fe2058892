"""Event-day arithmetic shared by the sensors, the schedule and the checks."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from pipelines.partitions import (
    DAY_MS,
    day_key,
    day_of,
    day_start_ms,
    event_day_partitions,
    horizon_range,
    most_recent_complete_day,
    parse_day_key,
)

START = dt.date(2024, 3, 1)
times = st.integers(min_value=day_start_ms(START), max_value=day_start_ms(dt.date(2030, 1, 1)))


def test_partitions_are_utc_days_from_the_start_date() -> None:
    parts = event_day_partitions(START)
    assert parts.get_first_partition_key() == "2024-03-01"
    assert parts.has_partition_key("2024-03-02") and not parts.has_partition_key("2024-02-29")


@given(times)
def test_day_of_matches_datetime(ts: int) -> None:
    expected = dt.datetime.fromtimestamp(ts / 1000, dt.UTC).date()
    assert day_of(ts) == expected
    assert day_start_ms(day_of(ts)) <= ts < day_start_ms(day_of(ts)) + DAY_MS
    assert parse_day_key(day_key(day_of(ts))) == day_of(ts)


@given(times, st.integers(min_value=1, max_value=40))
def test_horizon_is_the_last_n_days_ending_at_stream_time(ts: int, n: int) -> None:
    rng = horizon_range(ts, n, START)
    first, last = parse_day_key(rng.start), parse_day_key(rng.end)
    assert last == day_of(ts)
    assert first == max(START, day_of(ts) - dt.timedelta(days=n - 1))


@given(times, st.one_of(st.none(), st.integers(min_value=0, max_value=3 * DAY_MS)))
def test_most_recent_complete_day_is_past_grace(ts: int, grace: int | None) -> None:
    day = most_recent_complete_day(ts, grace)
    bound = ts - (grace or 0)
    # Every ms of the day is below stream time - grace (no in-grace record can still come) ...
    assert day_start_ms(day + dt.timedelta(days=1)) - 1 < bound
    # ... and it is the latest such day.
    nxt = day + dt.timedelta(days=1)
    assert not day_start_ms(nxt + dt.timedelta(days=1)) - 1 < bound
