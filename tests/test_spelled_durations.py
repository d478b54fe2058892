"""A spec's durations spelled as the UI shows them (`30 min`, `2 days 6 h`): read back to the
milliseconds `joins.core.human.duration` wrote them from, every other spelling refused with
what to write instead."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from joins.core.human import duration, parse_duration
from joins.core.time import MAX_DURATION_MS, DurationMs


class Setting(BaseModel):
    grace_ms: DurationMs


@given(st.integers(0, MAX_DURATION_MS))
def test_what_the_ui_shows_reads_back_to_its_milliseconds(ms: int) -> None:
    assert parse_duration(duration(ms)) == ms
    assert Setting(grace_ms=duration(ms)).grace_ms == ms


@pytest.mark.parametrize(("text", "ms"), [
    ("30 min", 1_800_000), ("30min", 1_800_000), ("1 hour", 3_600_000), ("2 Hours", 7_200_000),
    ("90 seconds", 90_000), ("1 d", 86_400_000), ("1 day 1 ms", 86_400_001), ("0 s", 0),
    (" 2 days  6 h ", 194_400_000),
])
def test_long_names_and_spacing(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize(("text", "said"), [
    ("30m", "`m` could mean minutes or months: write `min` for minutes"),
    ("1800000", "a number of milliseconds is written without quotes (1800000)"),
    ("1.5 h", "whole numbers only: write '1 h 30 min' rather than '1.5 h'"),
    ("1 week", "unknown unit `week`"),
    ("half an hour", "not a duration: write a number of milliseconds (1800000) or a duration"),
    ("30 min later", "not a duration"),
    ("-5 s", "not a duration"),
    ("", "an empty duration"),
])
def test_other_spellings_are_refused_saying_what_to_write(text: str, said: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(said)):
        parse_duration(text)


@pytest.mark.parametrize("value", [True, 1.5, 1_800_000.0, "1800000", -1, MAX_DURATION_MS + 1,
                                   f"{MAX_DURATION_MS} ms 1 ms"])
def test_a_setting_still_refuses_what_is_no_whole_duration(value: object) -> None:
    # Strings are parsed; nothing else is coerced (a bool or a float is no duration).
    with pytest.raises(ValidationError):
        Setting(grace_ms=value)
