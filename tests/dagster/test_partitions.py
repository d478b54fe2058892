"""Event-day partitions that fit the data, and the day arithmetic the sensors, the schedule and
the checks share."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assets.partitions import day_span, event_day_partitions
from joins.core.time import DAY_MS, day_of, day_start_ms
from joins.operators.stream_table_join.pipeline import StreamTableJoinEngine
from joins.pipeline import PipelineLayout, observe, parse_pipeline_spec
from pipelines.definitions import DEMO_SPEC
from pipelines.partitions import (
    contiguous_ranges,
    day_key,
    fitted_partitions,
    horizon_range,
    late_data_days,
    most_recent_complete_day,
    parse_day_key,
)

START = dt.date(2024, 3, 1)
times = st.integers(min_value=day_start_ms(START), max_value=day_start_ms(dt.date(2030, 1, 1)))


def test_partitions_are_utc_days_from_first_to_last() -> None:
    parts = event_day_partitions(START, dt.date(2024, 3, 3))
    assert parts.get_partition_keys() == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert event_day_partitions(START).get_partition_keys() == ["2024-03-01"]


def test_the_newest_partitions_the_ui_plots_end_at_the_last_day_not_today() -> None:
    """The UI plots the metadata of the newest partitions, which Dagster lists counting back
    from now: without the end offset they were days after the data (and the plots empty)."""
    from resources.dagster_private import PartitionLoadingContext, TemporalContext

    parts = event_day_partitions(START, dt.date(2024, 3, 3))
    context = PartitionLoadingContext(
        temporal_context=TemporalContext(effective_dt=dt.datetime.now(dt.UTC), last_event_id=None),
        dynamic_partitions_store=None)
    newest = parts.get_paginated_partition_keys(context, limit=120, ascending=False).results
    assert newest == ["2024-03-03", "2024-03-02", "2024-03-01"]
    assert parts.get_partition_keys() == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert parts.has_partition_key("2024-03-03") and not parts.has_partition_key("2024-03-04")
    # A partition set that ends today or later has no offset.
    today = dt.datetime.now(dt.UTC).date()
    assert event_day_partitions(today - dt.timedelta(days=2), today).end_offset == 0


def _layout(tmp_path) -> PipelineLayout:
    return PipelineLayout(str(tmp_path), parse_pipeline_spec(DEMO_SPEC))


def test_partitions_fit_the_data(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the first day with output to the day of the join's stream time: no empty future,
    no days before the data, whatever the spec's start date."""
    layout = _layout(tmp_path)
    # Nothing joined yet: the spec's start date alone.
    assert fitted_partitions(layout).get_partition_keys() == ["2024-03-01"]
    monkeypatch.setattr(observe, "day_rows", lambda layout: {"2024-03-05": 10, "2024-03-06": 3})
    stream_time = day_start_ms(dt.date(2024, 3, 8)) + 3_600_000   # buffered records of 03-08
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time", lambda self: stream_time)
    assert fitted_partitions(layout).get_partition_keys() == [
        "2024-03-05", "2024-03-06", "2024-03-07", "2024-03-08"]
    # A join added over existing data: its stream input starts two days before any output (an
    # inner join that matched nothing then); those days can still be selected for a backfill.
    # The versioned lookup table's older history is not the join's days.
    lows = {"orders": day_start_ms(dt.date(2024, 3, 3)) + 5, "rates": day_start_ms(dt.date(2024, 1, 1))}

    def summary(path: str, columns: list[str] | None = None, **_: object) -> object:
        name = next((n for n in lows if n in path), None)
        return None if name is None else SimpleNamespace(min={"ts": lows[name]}, max={}, rows=1)

    monkeypatch.setattr(observe.lake, "table_summary", summary)
    assert fitted_partitions(layout).get_partition_keys()[:3] == [
        "2024-03-03", "2024-03-04", "2024-03-05"]


def test_partitions_reaching_back_to_1970_are_kept_and_said(tmp_path, monkeypatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """An output day of 1970 (a ts in seconds, or near 0) is data: its partitions stay, and the
    code location's log says where to look; ten years or less says nothing."""
    layout = _layout(tmp_path)
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time",
                        lambda self: day_start_ms(dt.date(2024, 3, 2)))
    monkeypatch.setattr(observe, "day_rows", lambda layout: {"1970-01-20": 1, "2024-03-01": 9})
    with caplog.at_level("WARNING", logger="pipelines.partitions"):
        keys = fitted_partitions(layout).get_partition_keys()
    assert (keys[0], keys[-1], len(keys)) == ("1970-01-20", "2024-03-02", 19_766)
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith("orders_with_rates: 19766 event-day partitions, from 1970-01-20 to "
                           "2024-03-02; if 1970-01-20 is not a day of your data"), said
    assert "ts is epoch milliseconds" in said
    caplog.clear()
    monkeypatch.setattr(observe, "day_rows", lambda layout: {"2014-03-03": 1})
    with caplog.at_level("WARNING", logger="pipelines.partitions"):
        assert len(fitted_partitions(layout).get_partition_keys()) == 3_653
    assert not caplog.records


def test_a_lake_that_cannot_be_read_falls_back_to_the_start_date(tmp_path, monkeypatch) -> None:
    def broken(layout):
        raise OSError("storage unreachable")

    monkeypatch.setattr(observe, "day_rows", broken)
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time", lambda self: 0)
    assert fitted_partitions(_layout(tmp_path)).get_partition_keys() == ["2024-03-01"]


def test_late_data_days_and_contiguous_ranges() -> None:
    parts = event_day_partitions(START, dt.date(2024, 3, 10))
    st = day_start_ms(dt.date(2024, 3, 5)) + 3_600_000
    assert late_data_days(st, DAY_MS, parts) == ["2024-03-04", "2024-03-05"]
    assert late_data_days(st, 3 * DAY_MS, parts) == ["2024-03-02", "2024-03-03", "2024-03-04",
                                                     "2024-03-05"]
    # Clipped to the partitions (the first day, and a stream time past the loaded days).
    assert late_data_days(day_start_ms(START), 5 * DAY_MS, parts) == ["2024-03-01"]
    assert late_data_days(day_start_ms(dt.date(2024, 3, 12)), DAY_MS, parts) == []
    ranges = contiguous_ranges(["2024-03-05", "2024-03-01", "2024-03-02", "2024-03-07", "2024-03-06"])
    assert [(r.start, r.end) for r in ranges] == [("2024-03-01", "2024-03-02"),
                                                  ("2024-03-05", "2024-03-07")]


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


def test_input_times_come_from_the_inputs_file_statistics(tmp_path) -> None:
    """Newest over every input (the lag a user sees); oldest over the inputs whose records become
    output rows (the first partition), not a versioned lookup table's older history."""
    import pyarrow as pa

    from joins import lake

    layout = _layout(tmp_path)
    assert observe.newest_input_time(layout) is None and observe.oldest_event_time(layout) is None
    for role, times in (("stream", [5_000, 9_000]), ("table", [1_000, 12_000])):
        lake.write_delta(pa.table({"ts": pa.array(times, pa.int64())}), layout.input_table(role))
    assert observe.newest_input_time(layout) == 12_000
    assert observe.oldest_event_time(layout) == 5_000


def test_a_span_of_days_reads_as_the_day_or_first_last_and_count() -> None:
    assert day_span(["2024-03-02"]) == "2024-03-02"
    assert day_span(["2024-03-01", "2024-03-02", "2024-03-04"]) == "2024-03-01 .. 2024-03-04 (3 days)"
