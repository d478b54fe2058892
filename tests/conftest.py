"""Shared fixtures and settings. One SparkSession per test process (a start costs seconds), the
JVMs' settings for tests, the Hypothesis profiles (tests/budget.py), the timings of every run
(tests/timings.py) and the scheduling groups of xdist (tests/scheduling.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from tests import budget, scheduling, timings

budget.register_profiles()   # default, ci (derandomized), long: tests/budget.py


# The JVMs the suite starts for seconds to minutes (the replay command's child, the two warm
# processes, the cluster's daemons and executors, Spark Connect servers, Dagster run workers)
# run on tiny data while the two workers keep both cores busy: C2's compilations were 40% of a
# Spark test file's CPU (78 s of 193 s) and did not pay back. Measured as the suite runs: the
# cluster subset 3.7 min C1-only, 7.6 min with C2. A worker's own session JVM lives for the
# whole run, where C2's code may pay back: it keeps the tiered JIT (SESSION_JVM_OPTIONS), with
# C2 kept for methods ten times hotter than by default: three Spark test files in one JVM took
# 243 s of JVM CPU against 269 s (C2's threads 39 s against 80 s), run side by side; C1 only 294 s,
# thresholds 40 times the default 252 s. One collector thread, not G1's concurrent ones, with a
# 512 MB young generation and metaspace room for Spark's classes (no full collections while they
# load): with the 1 MB memory pages of TEST_SPARK_CONF, the two sessions' collector took 67 s of
# a CI run against about 155 s (docs/testing.md). The `java`
# launcher reads JDK_JAVA_OPTIONS (and says so on stderr); TJ_SESSION_JVM_OPTIONS replaces the
# session's options (to measure others).
JVM_TEST_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
SESSION_JVM_OPTIONS = os.environ.get(
    "TJ_SESSION_JVM_OPTIONS",
    "-XX:+UseSerialGC -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=20000 "
    "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=400000 -Xmn512m "
    "-XX:MetaspaceSize=256m")
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
# benchmarks run the project's settings, and TJ_TEST_CODEGEN=1 runs any subset with them (a
# fold's nullability bug showed only with generated code: docs/testing.md).
TEST_SPARK_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    # Spark sizes a memory page from the heap (16 MB for a 2 GB driver), and each broadcast hash
    # table of a few rows keeps one until a full collection lets the context cleaner drop its
    # broadcast: 400-600 MB of a session's live heap after replays, 27 MB with 1 MB pages.
    "spark.buffer.pageSize": "1m",
    # The optimizer's constraint propagation infers filters (a join key's IS NOT NULL, a
    # filter carried across an equality) from every operator's constraints, worked out again
    # for each of a micro-batch's dozens of plans; on rows by the dozen the filters it infers
    # save nothing. `python -m bench.replays --conf spark.sql.constraintPropagation.enabled=false`
    # (four operators' scenarios one record a batch, alternating in one process): 0.87 times
    # the time, the foreign-key batch 0.78 (docs/testing.md).
    "spark.sql.constraintPropagation.enabled": "false",
}


def suite_settings() -> Any:
    """A test worker's SparkSettings (also `bench.replays`'). Local unless TJ_SPARK_MASTER /
    TJ_SPARK_REMOTE say otherwise: tests/cluster runs a subset of the suite so against a
    standalone master and a Spark Connect server."""
    from joins.spark import SparkSettings

    settings = replace(SparkSettings.from_env(), shuffle_partitions=2, driver_memory="2g")
    if _local(settings) and os.environ.get("TJ_TEST_CODEGEN") != "1":
        # TJ_SPARK_CONF still wins: a run measuring another setting says so there.
        settings = replace(settings, extra_conf={**TEST_SPARK_CONF, **settings.extra_conf})
    return settings


def _local(settings: Any) -> bool:
    return settings.remote is None and settings.master.startswith("local")


@pytest.fixture(scope="session")
def spark():
    from joins.spark import get_spark

    settings = suite_settings()
    local = _local(settings)
    with pytest.MonkeyPatch.context() as mp:
        if local and os.environ.get("JDK_JAVA_OPTIONS") == JVM_TEST_OPTIONS:
            mp.setenv("JDK_JAVA_OPTIONS", SESSION_JVM_OPTIONS)   # this JVM lives the whole run
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
