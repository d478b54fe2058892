"""How the suite is spread over xdist workers (`./tj test` runs `--dist loadfile`, which this
module's scheduler refines).

Every test is in one scheduling group, which one worker runs from start to end, so that the
group's module- and session-scoped fixtures (a demo lake, a Dagster server, the standalone
cluster, warm worker processes) are built once: by default the group is the test's file; the
files that share a fixture built once per worker form one group (`SHARED_GROUPS`).

Groups go out longest first (the seconds of each in `tests/durations.json`, written by
`python -m tests.timings --save-durations` after a full run; a group missing there counts one
second per test), so that the last group to start is a short one and the workers finish
together.

(xdist's own `--dist loadgroup` would read groups from marks, but it renames test ids to do so,
which pytest 9 no longer lets it do; the controller sees only test ids, so the groups are named
here, by file.)
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
UNKNOWN_S_PER_TEST = 1.0

# Files whose tests share a fixture that a worker builds once for all of them.
SHARED_GROUPS: dict[str, tuple[str, ...]] = {
    # Two warm processes with a SparkSession each (tests/processes.py, the `two_processes` fixture).
    "two-processes": ("tests/spark/test_one_writer.py", "tests/spark/test_ingest_concurrency.py",
                      "tests/lake/test_concurrent_writes.py"),
}
_GROUP_OF_FILE = {path: group for group, paths in SHARED_GROUPS.items() for path in paths}


def group_of_nodeid(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return _GROUP_OF_FILE.get(path, path)


def known_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except FileNotFoundError:
        return {}


def order_groups(items: list[pytest.Item]) -> None:
    """Order the tests group by group, longest group first (stable inside a group). Every worker
    collects the same order; the controller hands out groups in it."""
    groups: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        groups[group_of_nodeid(item.nodeid)].append(item)
    known = known_seconds()
    first = {g: n for n, g in enumerate(groups)}

    def cost(group: str) -> float:
        return assumed_seconds(known, group, len(groups[group]))

    items[:] = [item for g in sorted(groups, key=lambda g: (-cost(g), first[g]))
                for item in groups[g]]


def assumed_seconds(known: dict[str, float], group: str, tests: int) -> float:
    """What the scheduler takes a group to cost: its figure, or UNKNOWN_S_PER_TEST a test."""
    return known.get(group, UNKNOWN_S_PER_TEST * tests)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scheduler by whole scopes, with a scope per group instead of per file."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of_nodeid(nodeid)

    return GroupScheduling(config, log)
