"""Names for the Spark jobs of a micro-batch, so that the Spark UI (and a profiler) can tell
which step of the batch a job belongs to: job group `stream_table_join:<phase>`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GROUP_PREFIX = "stream_table_join:"


@contextmanager
def phase(spark: SparkSession, name: str) -> Iterator[None]:
    """Run the block's Spark jobs under the job group of `name`, restoring the caller's group."""
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect has no SparkContext; job groups are a local-mode nicety
        yield
        return
    prev_group = sc.getLocalProperty("spark.jobGroup.id")
    prev_desc = sc.getLocalProperty("spark.job.description")
    sc.setJobGroup(GROUP_PREFIX + name, f"stream-table join micro-batch: {name}")
    try:
        yield
    finally:
        sc.setLocalProperty("spark.jobGroup.id", prev_group)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", prev_desc)  # type: ignore[arg-type]
