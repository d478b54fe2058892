"""Where the machine's cores sat idle during a run, and which files were running then.

A run on two workers is CPU-bound when both keep a core busy; a test that waits (on a server's
start, a sensor's tick, a poll's sleep) leaves its core idle unless the other worker's processes
take it. The recorder (tests/timings.py) samples the machine's idle CPU-seconds from
`/proc/stat` every few seconds and keeps each test's start and stop; this module shares each
sample's idle seconds among the files whose tests ran in it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

STAT = Path("/proc/stat")
SHOWN = 12


def idle_seconds() -> float | None:
    """The whole machine's idle CPU-seconds since boot (iowait included); None without /proc."""
    try:
        fields = [int(x) for x in STAT.read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[3] + fields[4]) / os.sysconf("SC_CLK_TCK")


def idle_by_file(data: dict[str, Any]) -> dict[str, float]:
    """Each sample's idle seconds shared evenly among the files running over its interval (from
    the sample before it; the first sample, of no seconds, marks where the first begins)."""
    samples: list[list[float]] = data.get("idle") or []
    spans: dict[str, list[float]] = data.get("spans") or {}
    out: dict[str, float] = defaultdict(float)
    previous = None
    for at, seconds in samples:
        start, previous = (at if previous is None else previous), at
        if seconds <= 0:
            continue
        running = {nodeid.split("::", 1)[0] for nodeid, (a, b) in spans.items()
                   if a < at and b > start}
        for path in running or {"(between tests)"}:
            out[path] += seconds / max(1, len(running))
    return dict(out)


def report(data: dict[str, Any]) -> list[str]:
    samples = data.get("idle") or []
    if not samples:
        return []
    total = sum(s for _, s in samples)
    capacity = (data.get("cpus") or 1) * data["wall_s"]
    lines = [f"   idle cores: {total:.0f} of {capacity:.0f} CPU-seconds "
             f"({100 * total / capacity if capacity else 0:.0f} %); the files running meanwhile:"]
    ranked = sorted(idle_by_file(data).items(), key=lambda kv: -kv[1])[:SHOWN]
    lines += [f"   {s:6.0f} s  {path}" for path, s in ranked if s >= 1]
    return lines
