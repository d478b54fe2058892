"""Fixtures of the Dagster tests: a small join spec and an ephemeral Dagster instance."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pipelines.definitions import DEMO_SPEC


@pytest.fixture
def spec_dict() -> dict[str, Any]:
    return copy.deepcopy(DEMO_SPEC)


@pytest.fixture
def instance():
    import dagster as dg

    with dg.instance_for_test() as inst:
        yield inst
