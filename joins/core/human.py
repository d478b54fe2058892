"""Times and durations as a person reads and writes them: ISO 8601 UTC instants, `30 min`,
`1 day`."""

from __future__ import annotations

import datetime as dt
import re

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
UNITS = (("day", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000), ("ms", 1))


def iso_time(ms: int) -> str:
    """An event time in epoch ms as ISO 8601 UTC: `2024-03-02T14:05:00Z` (milliseconds shown
    only when there are some)."""
    stamp = _EPOCH + dt.timedelta(milliseconds=ms)
    # Four-digit years (strftime's %Y does not pad years before 1000 on every platform).
    text = f"{stamp.year:04d}-" + stamp.strftime("%m-%dT%H:%M:%S")
    if ms % 1000:
        text += f".{ms % 1000:03d}"
    return text + "Z"


def duration(ms: int) -> str:
    """A duration in ms, exact, largest units first: `30 min`, `1 day`, `2 days 6 h`,
    `1 s 500 ms`."""
    if ms < 0:
        return "-" + duration(-ms)
    if ms == 0:
        return "0 ms"
    parts: list[str] = []
    rest = ms
    for name, size in UNITS:
        n, rest = divmod(rest, size)
        if n:
            parts.append(f"{n} {name}{'s' if name == 'day' and n > 1 else ''}")
    return " ".join(parts)


# The spellings `parse_duration` reads, each unit's short form first (what `duration` writes).
_UNIT_NAMES = {
    "day": ("day", "days", "d"),
    "h": ("h", "hour", "hours", "hr", "hrs"),
    "min": ("min", "mins", "minute", "minutes"),
    "s": ("s", "sec", "secs", "second", "seconds"),
    "ms": ("ms", "millisecond", "milliseconds"),
}
_UNIT_MS = {spelling: size for unit, size in UNITS for spelling in _UNIT_NAMES[unit]}
_PART = re.compile(r"\s*([0-9]+)\s*([a-z]+)\s*")
DURATION_HELP = ("a number of milliseconds (1800000) or a duration such as '30 min', '1 h' or "
                 "'2 days 6 h' (units: day, h, min, s, ms)")


def parse_duration(text: str) -> int:
    """Milliseconds of a duration as `duration` writes it (`30 min`, `2 days 6 h`), the units'
    long names too (`1 hour`, `90 seconds`). Whole numbers only; ValueError says what is wrong.

    `m` is refused: minutes to some, months to others (and metres to a YAML reader)."""
    rest, total, pos = text.lower(), 0, 0
    if not rest.strip():
        raise ValueError(f"an empty duration: write {DURATION_HELP}")
    while pos < len(rest):
        part = _PART.match(rest, pos)
        if part is None:
            if re.search(r"\d[.,]\d", rest):
                raise ValueError("whole numbers only: write '1 h 30 min' rather than '1.5 h'")
            if rest.strip().isdigit():
                raise ValueError(f"a number of milliseconds is written without quotes "
                                 f"({rest.strip()}), or with a unit ('30 min')")
            raise ValueError(f"not a duration: write {DURATION_HELP}")
        number, unit = int(part.group(1)), part.group(2)
        if unit == "m":
            raise ValueError("`m` could mean minutes or months: write `min` for minutes")
        if unit not in _UNIT_MS:
            raise ValueError(f"unknown unit `{unit}`: write {DURATION_HELP}")
        total += number * _UNIT_MS[unit]
        pos = part.end()
    return total
