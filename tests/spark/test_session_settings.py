"""What the shared session does beyond Spark's defaults, checked on the session itself: JVM
class names resolved once (joins/spark/names.py), lists sent ten elements a round trip and
columns by name kept (joins/spark/py4j_calls.py), frames cut into at most the configured
number of tasks before a write or a checkpoint (joins/spark/frames.py), the local file
system without a shell (temporaljoins.LocalFileSystem, joins/spark/session.py), and compiled
code kept for more classes than a micro-batch generates (joins/spark/session.py), and Hadoop
configurations without the YARN and MapReduce defaults (temporaljoins.HadoopDefaults), and
lambda closures cleaned once per class (temporaljoins.LeanSparkContext, joins/spark/context.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from pyspark import SparkContext
from pyspark.sql import functions as F

from joins import lake
from joins.spark.frames import checkpointed, write_tasks
from tests.spark.codegen import generated_code

pytestmark = pytest.mark.spark


def test_classes_resolve_once_and_everything_else_as_before(spark: Any) -> None:
    jvm = SparkContext._jvm
    assert jvm.PythonUtils is jvm.PythonUtils                  # a class: looked up once
    assert jvm.functions.col is jvm.functions.col              # a static method: once
    assert jvm.java.lang.Math.abs(-3) == 3                     # packages still resolve
    assert jvm.no_such_name is not jvm.no_such_name            # a package, or nothing yet: asked
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1        # a static field: read each time
    assert jvm.java.util.ArrayList().size() == 0               # constructors
    assert spark._jvm is jvm
    df = spark.range(3).select(F.col("id"), (F.col("id") + F.lit(1)).alias("next"))
    assert [tuple(r) for r in df.orderBy("id").collect()] == [(0, 1), (1, 2), (2, 3)]


@pytest.fixture
def round_trips(spark: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The py4j commands this thread sends from now on."""
    client = type(SparkContext._gateway._gateway_client)
    sent: list[str] = []
    real = client.send_command

    def counting(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(command)
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(client, "send_command", counting)
    return sent


def test_a_class_by_its_full_name_is_reached_once(spark: Any, round_trips: list[str]) -> None:
    """`jvm.java.util.regex.Pattern` sends each package's name first, which py4j tries as a class
    under every import (a miss each, every jar searched); the engine reaches its classes by full
    name, once per process."""
    from joins.spark.names import jvm_class

    jvm = SparkContext._jvm
    pattern = jvm_class(jvm, "java.util.regex.Pattern")
    round_trips.clear()
    assert jvm_class(jvm, "java.util.regex.Pattern") is pattern
    assert round_trips == []
    assert list(pattern.compile(",").split("a,b")) == ["a", "b"]


LISTS = [[], [7], ["a", "b"], list(range(25)), tuple(range(11)), [None, "x", None],
         [True, 2, "s", 1.5, 2**40], [[1, 2], [3], []], [b"ab", b"cd"], {"k", "v"}]


@pytest.mark.parametrize("items", LISTS, ids=lambda v: f"{type(v).__name__}{len(v)}")
def test_a_python_list_reaches_the_jvm_whole_and_in_order(spark: Any, items: Any) -> None:
    java = SparkContext._jvm.java.util.ArrayList(items)   # the argument goes through the converter

    def back(v: Any) -> Any:
        if isinstance(v, bytearray):
            return bytes(v)
        return [back(x) for x in v] if hasattr(v, "size") else v

    got = back(java)
    if isinstance(items, set):
        assert sorted(got) == sorted(items)
    else:
        assert got == list(items)


def test_a_list_of_25_columns_takes_7_round_trips_not_27(spark: Any,
                                                         round_trips: list[str]) -> None:
    jvm = SparkContext._jvm
    columns = [jvm.functions.col(f"c{i}") for i in range(25)]
    round_trips.clear()
    seq = jvm.PythonUtils.toSeq(columns)
    assert len(round_trips) == 7, round_trips
    assert seq.size() == 25 and seq.apply(24).toString() == "c24"


def test_a_column_by_name_is_asked_of_the_jvm_once(spark: Any, round_trips: list[str]) -> None:
    first = F.col("a_name_seen_once")
    asked = len(round_trips)
    again = F.col("a_name_seen_once")
    assert len(round_trips) == asked                       # no round trip the second time
    assert again._jc._target_id == first._jc._target_id
    df = spark.range(2).select(F.col("id").alias("a_name_seen_once"))
    assert [r[0] for r in df.select(first, again.alias("b")).where(first > 0).collect()] == [1]


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


def test_the_local_file_system_sets_permissions_and_reads_links_without_a_shell(
        spark: Any, tmp_path: Path) -> None:
    jvm = SparkContext._jvm
    conf = spark._jsc.hadoopConfiguration()
    hpath = jvm.org.apache.hadoop.fs.Path
    fs = hpath(f"file://{tmp_path}").getFileSystem(conf)
    assert fs.getClass().getName() == "temporaljoins.LocalFileSystem"
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(conf)
    assert context.getDefaultFileSystem().getClass().getName() == "temporaljoins.LocalFs"

    target = tmp_path / "data.txt"
    out = fs.create(hpath(f"file://{target}"), True)
    out.write(b"x")
    out.close()
    fs.setPermission(hpath(f"file://{target}"),
                     jvm.org.apache.hadoop.fs.permission.FsPermission.createImmutable(0o640))
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert fs.getFileStatus(hpath(f"file://{target}")).getLen() == 1

    link = tmp_path / "link"
    os.symlink(target, link)
    status = fs.getFileLinkStatus(hpath(f"file://{link}"))
    assert status.isSymlink() and status.getSymlink().toString() == str(target)
    assert fs.getLinkTarget(hpath(f"file://{link}")).toString() == str(target)
    assert not fs.getFileLinkStatus(hpath(f"file://{target}")).isSymlink()
    target.unlink()   # a dangling link is still a link
    assert fs.getFileLinkStatus(hpath(f"file://{link}")).isSymlink()

    # FileContext's rename (Delta's log store commits so) asks both link statuses.
    (tmp_path / "a").write_text("a")
    no_options = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 0)
    context.rename(hpath(f"file://{tmp_path}/a"), hpath(f"file://{tmp_path}/b"), no_options)
    assert (tmp_path / "b").read_text() == "a" and not (tmp_path / "a").exists()


def test_more_generated_classes_than_spark_keeps_by_default_stay_compiled(spark: Any) -> None:
    # Spark keeps 100 compiled classes by default; a foreign-key batch alone generates about 90,
    # so each batch compiled again what the one before had. 200 distinct classes (a projection
    # of one constant each), then the first ten again: already compiled, not evicted (by
    # default all ten are: Spark's cache holds about 25 classes in each of its 4 segments).
    jvm = SparkContext._jvm
    exprs = jvm.org.apache.spark.sql.catalyst.expressions
    compilations = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    integer = jvm.org.apache.spark.sql.types.DataTypes.IntegerType
    salt = os.getpid() % 1_000_000 * 1000   # classes no other test of this process compiled

    def compile_projections(count: int) -> int:
        start = compilations.getCount()
        for i in range(count):
            exprs.UnsafeProjection.create(exprs.Literal(salt + i, integer))
        return int(compilations.getCount() - start)

    with generated_code(spark, "CODEGEN_ONLY"):
        assert compile_projections(200) == 200
        assert compile_projections(10) == 0


def test_hadoop_configurations_carry_no_yarn_or_mapreduce_defaults(spark: Any,
                                                                   tmp_path: Path) -> None:
    # A write loads MapReduce's Job, whose class initializer adds mapred-default.xml and
    # yarn-default.xml to every configuration unless they were dropped for good
    # (temporaljoins.HadoopDefaults); then a read and a write of a CSV-and-Delta round trip.
    jvm = SparkContext._jvm
    lake.write_delta(spark.range(3), str(tmp_path / "t"), mode="append")
    spark.range(2).write.csv(str(tmp_path / "csv"))
    assert sorted(r[0] for r in spark.read.csv(str(tmp_path / "csv")).collect()) == ["0", "1"]
    assert lake.read_delta(spark, str(tmp_path / "t")).count() == 3

    defaults = list(jvm.temporaljoins.HadoopDefaults.defaultResources())
    assert "core-default.xml" in defaults
    assert not {"mapred-default.xml", "yarn-default.xml"} & set(defaults), defaults
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    assert conf.size() < 600, conf.size()
    # Keys only those files set fall back to the code's defaults; the session's own stay.
    assert conf.get("yarn.resourcemanager.address") is None
    assert conf.get("mapreduce.job.maps") is None
    assert conf.get("fs.defaultFS") == "file:///"          # core-default.xml's
    assert conf.get("fs.file.impl") == "temporaljoins.LocalFileSystem"


def test_hadoop_configurations_record_no_sources_of_their_defaults(spark: Any,
                                                                  tmp_path: Path) -> None:
    # Which file set each entry is Hadoop's diagnostics only, yet every copy of a configuration
    # copies the record and every task reads it back gzip-compressed entry by entry
    # (temporaljoins.HadoopDefaults.dropSources): the session's base holds none, a copy Spark
    # makes for a query only those of the entries set on it since.
    jvm = SparkContext._jvm
    defaults = jvm.temporaljoins.HadoopDefaults
    lake.write_delta(spark.range(3), str(tmp_path / "t"), mode="append")
    base = spark.sparkContext._jsc.hadoopConfiguration()
    copy = spark._jsparkSession.sessionState().newHadoopConf()
    set_by_spark = [e.getKey() for e in copy.iterator() if copy.getPropertySources(e.getKey())]
    assert defaults.sourcesRecorded(base) <= 8, defaults.sourcesRecorded(base)
    assert 0 < defaults.sourcesRecorded(copy) == len(set_by_spark) < copy.size() // 2
    assert copy.getPropertySources("fs.defaultFS") is None
    assert copy.get("fs.defaultFS") == "file:///"
    # A configuration shipped to tasks still reads back whole: a write and a read of files.
    lake.write_delta(spark.range(4), str(tmp_path / "t"), mode="append")
    assert lake.read_delta(spark, str(tmp_path / "t")).count() == 7


def test_each_lambda_class_is_cleaned_once_and_jobs_still_run(spark: Any, tmp_path: Path) -> None:
    from joins.spark.context import is_lean

    assert is_lean(spark)
    sc = spark.sparkContext._jsc.sc()

    def work(rows: int) -> None:
        lake.write_delta(spark.range(5).withColumn("v", F.col("id") * 2), str(tmp_path / "t"),
                         mode="append")
        df = lake.read_delta(spark, str(tmp_path / "t"))
        assert df.count() == rows
        assert df.where("v >= 4").count() == rows * 3 // 5

    work(5)  # a new query's lambdas are cleaned by Spark and remembered
    classes, skipped = sc.cleanLambdaClasses(), sc.cleanSkipped()
    assert classes > 0
    work(10)  # the same queries again: the same lambda classes, none cleaned anew
    assert sc.cleanSkipped() > skipped
    assert sc.cleanLambdaClasses() == classes
