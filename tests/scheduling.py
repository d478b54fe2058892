"""How the suite is spread over xdist workers (`./tj test` runs `--dist loadgroup`).

Every test is in one scheduling group, which one worker runs from start to end, so that the
group's module- and session-scoped fixtures (a demo lake, a Dagster server, the standalone
cluster, warm worker processes) are built once: by default the group is the test's file; a
module joins a shared group with `pytestmark = pytest.mark.xdist_group("name")` when it shares
such a fixture with other modules.

Groups go out longest first (the seconds of each in `tests/durations.json`, written by
`python -m tests.timings --save-durations` after a full run; a group missing there counts one
second per test), so that the last group to start is a short one and the workers finish
together.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
UNKNOWN_S_PER_TEST = 1.0


def group_of(item: pytest.Item) -> str:
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs["name"])
    return item.nodeid.split("::", 1)[0]


def known_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except FileNotFoundError:
        return {}


def assign_groups(items: list[pytest.Item]) -> None:
    """Put every test in its group and order the groups longest first (stable inside one)."""
    groups: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        group = group_of(item)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
        groups[group].append(item)
    known = known_seconds()
    first = {g: n for n, g in enumerate(groups)}

    def cost(group: str) -> float:
        return known.get(group, UNKNOWN_S_PER_TEST * len(groups[group]))

    items[:] = [item for g in sorted(groups, key=lambda g: (-cost(g), first[g]))
                for item in groups[g]]
