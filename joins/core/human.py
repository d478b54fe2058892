"""Times and durations as a person reads them: ISO 8601 UTC instants, "30 min" / "1 day"."""

from __future__ import annotations

import datetime as dt

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
