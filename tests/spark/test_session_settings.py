"""What the shared session does beyond Spark's defaults, checked on the session itself: JVM
class names resolved once (joins/spark/names.py) and frames cut into at most the configured
number of tasks before a write or a checkpoint (joins/spark/frames.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark import SparkContext
from pyspark.sql import functions as F

from joins import lake
from joins.spark.frames import checkpointed, write_tasks

pytestmark = pytest.mark.spark


def test_classes_resolve_once_and_everything_else_as_before(spark: Any) -> None:
    jvm = SparkContext._jvm
    assert jvm.PythonUtils is jvm.PythonUtils                  # a class: looked up once
    assert jvm.functions.col is jvm.functions.col              # a static method: once
    assert jvm.java.lang.Math.abs(-3) == 3                     # packages still resolve
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1        # a static field: read each time
    assert jvm.java.util.ArrayList().size() == 0               # constructors
    assert spark._jvm is jvm
    df = spark.range(3).select(F.col("id"), (F.col("id") + F.lit(1)).alias("next"))
    assert [tuple(r) for r in df.orderBy("id").collect()] == [(0, 1), (1, 2), (2, 3)]


def test_a_union_of_many_branches_is_written_in_at_most_the_configured_tasks(
        spark: Any, tmp_path: Path) -> None:
    branches = [spark.createDataFrame([(i, j) for j in range(3)], "b long, v long")
                for i in range(6)]
    union = branches[0]
    for branch in branches[1:]:
        union = union.unionByName(branch)
    assert union.rdd.getNumPartitions() > write_tasks(spark)   # what Spark would write
    lake.write_delta(union, str(tmp_path / "t"), mode="append")
    summary = lake.table_summary(str(tmp_path / "t"))
    assert summary is not None and 1 <= summary.files <= write_tasks(spark)
    back = lake.read_delta(spark, str(tmp_path / "t"))
    assert sorted(tuple(r) for r in back.collect()) == sorted((i, j) for i in range(6)
                                                              for j in range(3))
    assert checkpointed(union).rdd.getNumPartitions() <= write_tasks(spark)


def test_a_frame_the_caller_partitioned_keeps_its_partitions(spark: Any, tmp_path: Path) -> None:
    frame = spark.range(0, 40, numPartitions=6)
    lake.write_delta(frame.coalesce(1), str(tmp_path / "one"), mode="append")
    lake.write_delta(frame.repartition(3), str(tmp_path / "three"), mode="append")
    files = {n: lake.table_summary(str(tmp_path / n)) for n in ("one", "three")}
    assert files["one"] is not None and files["one"].files == 1
    assert files["three"] is not None and files["three"].files == 3
