"""Shared fixtures. One SparkSession for the whole test run (a start costs seconds)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", parent=settings.get_profile("default"), max_examples=150)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# The tests' data is tiny: compiling each query's generated code, and re-planning it stage by
# stage, costs more than running it (measured: the table-table history tests 154 s -> 123 s).
# The semantics do not depend on either; the cluster subset (tests/cluster), the demo and the
# benchmarks run the project's settings.
TEST_SPARK_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}


@pytest.fixture(scope="session")
def spark():
    from joins.spark import SparkSettings, get_spark

    # Local unless TJ_SPARK_MASTER / TJ_SPARK_REMOTE say otherwise: tests/cluster runs a subset
    # of the suite so against a standalone master and a Spark Connect server.
    settings = replace(SparkSettings.from_env(), shuffle_partitions=2, driver_memory="2g")
    if settings.remote is None and settings.master.startswith("local"):
        settings = replace(settings, extra_conf=TEST_SPARK_CONF)
    session = get_spark(settings)
    yield session
