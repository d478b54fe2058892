"""Shared fixtures. One SparkSession for the whole test run (a start costs seconds)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", parent=settings.get_profile("default"), max_examples=150)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def spark():
    from joins.spark import SparkSettings, get_spark

    session = get_spark(SparkSettings(shuffle_partitions=2, driver_memory="2g"))
    yield session
