"""Shared fixtures and settings. One SparkSession per test process (a start costs seconds), the
JVMs' settings for tests, the Hypothesis profiles, the timings of every run (tests/timings.py) and
the scheduling groups of xdist (tests/scheduling.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests import scheduling, timings

settings.register_profile(
    "default", deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", parent=settings.get_profile("default"), max_examples=150)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# Every JVM the suite starts (the test session's, the CLI's and the two-process tests' children,
# the cluster's daemons and executors, Spark Connect servers, Dagster run workers) runs for
# seconds to minutes on tiny data, two at a time on two cores: C2's compilations were 40% of a
# Spark test's CPU (measured on tests/spark/test_table_filter_aggregate.py: 78 s of 193 s) and
# never paid back. C1 alone: two Spark test files side by side 370/432 s -> 267/350 s; one
# collector thread rather than G1's concurrent ones. The `java` launcher reads this variable
# (and notes on stderr that it did); the project's own settings are untouched.
JVM_TEST_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
os.environ.setdefault("JDK_JAVA_OPTIONS", JVM_TEST_OPTIONS)


def pytest_configure(config: pytest.Config) -> None:
    timings.install(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    scheduling.order_groups(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadfile":
        return scheduling.make_scheduler(config, log)
    return None


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


@pytest.fixture(scope="session")
def _warm_pair() -> Iterator[Any]:
    from tests.processes import warm_pair

    with warm_pair(TEST_SPARK_CONF) as pair:
        yield pair


@pytest.fixture
def two_processes(_warm_pair: Any) -> Iterator[Any]:
    """Two processes with a SparkSession each, warm across tests (tests/processes.py); the
    modules using them are one scheduling group (tests/scheduling.py), so one pair serves them."""
    yield _warm_pair
    _warm_pair.check_idle()
