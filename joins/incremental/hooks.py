"""Named points inside a batch where a test can force an interleaving (a failpoint); no-ops
unless a test installed a callable there.

Points: `planned` (the plan is committed, nothing computed), `before commit <table>`,
`before done`, `backfill computed` (the backfill's rows and diff are ready, nothing committed).
"""

from __future__ import annotations

from collections.abc import Callable

_HOOKS: dict[str, Callable[[], None]] = {}


def at(point: str) -> None:
    hook = _HOOKS.get(point)
    if hook is not None:
        hook()


def install(point: str, hook: Callable[[], None]) -> None:
    _HOOKS[point] = hook


def clear() -> None:
    _HOOKS.clear()
