"""Named points inside a batch where a test can force an interleaving (a failpoint); no-ops
unless a test installed a callable there.

Points: `waiting for the lease` (another writer holds the join's lease; called once, then the
writer polls until it is free or the wait is over), `planned` (the plan is committed, nothing
computed), `before commit <table>`, `before done`, `backfill computed` (the backfill's rows and
diff are ready, nothing committed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_HOOKS: dict[str, Callable[[], None]] = {}


def at(point: str) -> None:
    hook = _HOOKS.get(point)
    if hook is not None:
        hook()


def waiting_for_the_lease(holder: Any) -> None:
    """A lease's `on_wait`: the point `waiting for the lease`."""
    at("waiting for the lease")


def install(point: str, hook: Callable[[], None]) -> None:
    _HOOKS[point] = hook


def clear() -> None:
    _HOOKS.clear()
