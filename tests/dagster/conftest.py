"""Fixtures of the Dagster tests: a small join spec and a Dagster instance."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from pipelines.definitions import DEMO_SPEC


@pytest.fixture
def spec_dict() -> dict[str, Any]:
    return copy.deepcopy(DEMO_SPEC)


@pytest.fixture
def instance() -> Iterator[Any]:
    """A file-backed instance, as `./tj dev`'s: sensor and schedule contexts hand it to other
    processes by reference (tests/dagster/instances.py has the in-memory one)."""
    import dagster as dg

    with dg.instance_for_test() as inst:
        yield inst


def _forget_defs_state_storage() -> None:
    """Dagster keeps the current definitions-state storage in a context variable; a sensor or
    schedule context left open (not used as `with`) sets it to an instance it opened and never
    resets it, and once that instance is collected, loading any `Definitions` fails ("undefined
    DagsterInstance weakref"). Our own code closes its contexts; this keeps one test's slip from
    failing the tests after it."""
    from resources import dagster_private

    dagster_private.current_defs_state_storage.set(None)


@pytest.fixture(autouse=True)
def no_leftover_defs_state_storage() -> None:
    _forget_defs_state_storage()


@pytest.fixture(autouse=True, scope="module")
def no_leftover_defs_state_storage_for_module_fixtures() -> None:
    # Autouse fixtures run first within their scope: this one before a module's own fixtures
    # (the browser tests' demo lake), which the per-test one above comes too late for.
    _forget_defs_state_storage()
