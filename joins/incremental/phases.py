"""Phases of a batch: Spark job groups (so the Spark UI and a profiler can tell which step of a
batch a job belongs to) and wall time per phase (what `bench/incremental_step.py` prints)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class PhaseClock:
    """Wall time per phase name, summed over the phase's occurrences, in first-seen order."""

    def __init__(self, spark: SparkSession, operator: str) -> None:
        self.spark = spark
        self.operator = operator
        self.timings: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            with job_group(self.spark, f"{self.operator}:{name}", f"{self.operator}: {name}"):
                yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - started


@contextmanager
def job_group(spark: SparkSession, group: str, description: str) -> Iterator[None]:
    """Run the block's Spark jobs under `group`, restoring the caller's group afterwards.

    Spark Connect has no SparkContext (no job groups): there the jobs carry `group` as an
    operation tag instead, which the server's UI shows with each job."""
    from joins.spark.connect import is_connect

    if is_connect(spark):
        tag = group.replace(",", ";")  # a tag holds no comma
        spark.addTag(tag)
        try:
            yield
        finally:
            spark.removeTag(tag)
        return
    sc = spark.sparkContext
    prev_group = sc.getLocalProperty("spark.jobGroup.id")
    prev_desc = sc.getLocalProperty("spark.job.description")
    sc.setJobGroup(group, description)
    try:
        yield
    finally:
        sc.setLocalProperty("spark.jobGroup.id", prev_group)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", prev_desc)  # type: ignore[arg-type]
