"""Checks that run INSIDE a cluster session, next to the suite's subset (tests/cluster starts
`pytest` on this file with TJ_SPARK_MASTER=spark://... or TJ_SPARK_REMOTE=sc://...): the session
is the cluster's, its tasks run in the worker's executors with the venv's interpreter and this
checkout's engine, the demo's pipeline runs end to end, and the as-of join's JVM index runs
there (classic) or is refused clearly (Connect). The file's name keeps plain `pytest` runs from collecting it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from joins.asof import asof_join
from joins.errors import ConfigError
from joins.spark.connect import is_connect
from joins.spark.context import is_lean

pytestmark = pytest.mark.spark

MASTER = os.environ.get("TJ_SPARK_MASTER", "")
REMOTE = os.environ.get("TJ_SPARK_REMOTE", "")
WORK_DIR = os.environ.get("TJ_CLUSTER_WORK_DIR", "")

if not (MASTER.startswith("spark://") or REMOTE) or not WORK_DIR:
    pytest.skip("runs inside a cluster session that tests/cluster starts", allow_module_level=True)

STREAM = [(i, i % 3, 10 * i) for i in range(12)]          # (id, key, ts)
TABLE = [(k, ts, f"v{k}@{ts}") for k in range(3) for ts in (0, 35, 70)]


def _expected() -> list[tuple[int, str]]:
    out = []
    for sid, key, ts in STREAM:
        valid = [v for k, t, v in TABLE if k == key and t <= ts]
        out.append((sid, valid[-1]))
    return out


def _frames(spark: Any) -> tuple[Any, Any]:
    # Several partitions on both sides: the probe runs as tasks on the executors.
    stream = spark.createDataFrame(STREAM, "id long, k long, ts long").repartition(3)
    table = spark.createDataFrame(TABLE, "k long, ts long, val string").repartition(2)
    return stream, table


def _join(spark: Any, strategy: str) -> list[tuple[int, str]]:
    stream, table = _frames(spark)
    out = asof_join(stream, table, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts",
                    strategy=strategy)  # type: ignore[arg-type]
    return sorted((r["id"], r["val"]) for r in out.collect())


def test_the_session_is_the_clusters(spark: Any) -> None:
    if REMOTE:
        assert is_connect(spark)
        # The Connect server's own sessions run on the standalone master.
        assert spark.conf.get("spark.master").startswith("spark://")
    else:
        assert not is_connect(spark)
        assert spark.sparkContext.master == MASTER
        # get_spark ships the engine's jar to the executors.
        assert "temporal-joins-jvm-" in spark.conf.get("spark.jars", "")
        # and the driver, which cleans each lambda class once, has it on its class path.
        assert is_lean(spark)


def test_tasks_run_in_the_workers_executors_with_the_venv_and_this_checkout(spark: Any) -> None:
    import pyarrow as pa

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os as _os
        import sys as _sys

        import joins

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"exe": [_sys.executable], "cwd": [_os.getcwd()],
                                              "engine": [joins.__file__]})

    rows = spark.range(4, numPartitions=2).mapInArrow(probe, "exe string, cwd string, engine string")
    seen = {(r["exe"], r["cwd"], r["engine"]) for r in rows.collect()}
    repo = str(Path(__file__).resolve().parents[2])
    for exe, cwd, engine in seen:
        assert exe == sys.executable, f"Python workers run {exe}, not the venv's {sys.executable}"
        # An executor's working directory is its folder under the worker's work dir.
        assert Path(cwd).resolve().is_relative_to(Path(WORK_DIR).resolve()), cwd
        assert engine.startswith(repo), f"tasks import the engine from {engine}, not {repo}"


def test_one_wave_of_the_demo_pipeline(spark: Any, tmp_path: Path) -> None:
    """One landing wave of the demo's pipeline (orders_with_rates) as Dagster runs it: both
    ingests, a micro-batch, then the backfill of its day with the join's checks. That is every
    kind of Spark job the pipeline runs (landing reads, Delta commits of files the executors
    wrote, the incremental join, its batch form, the checks' reads); the lake is a local path,
    which driver and executors share on this one machine."""
    import dagster as dg

    from joins import lake
    from joins.pipeline import PipelineLayout, parse_pipeline_spec
    from pipelines.definitions import DEMO_SPEC
    from resources import SparkResource
    from runplatform.warm_up import backfill_days, sample_lake

    day = {"dagster/asset_partition_range_start": "2024-03-01",
           "dagster/asset_partition_range_end": "2024-03-01"}
    root = tmp_path / "lake"
    with dg.instance_for_test() as instance:
        sample_lake(root, instance, SparkResource(), days=1, waves=1)
        output = PipelineLayout(str(root.resolve()), parse_pipeline_spec(DEMO_SPEC)).output
        assert lake.read_delta(spark, output).count() > 0, "the micro-batch joined nothing"
        result = backfill_days(root, instance, SparkResource(), day)
    assert result.success
    checks = result.get_asset_check_evaluations()
    assert len(checks) >= 3 and all(c.passed for c in checks), checks
    materialized = result.get_asset_materialization_events()
    assert [e.partition for e in materialized] == ["2024-03-01"]


@pytest.mark.skipif(bool(REMOTE), reason="classic sessions only (the index needs the driver JVM)")
def test_the_index_runs_on_the_executors(spark: Any) -> None:
    assert _join(spark, "index") == _expected()
    assert _join(spark, "auto") == _expected()


@pytest.mark.skipif(not REMOTE, reason="Spark Connect only")
def test_connect_refuses_the_index_clearly_and_auto_uses_the_sql_plans(spark: Any) -> None:
    with pytest.raises(ConfigError, match=r"'index' cannot run here: the session is Spark Connect "
                                          r"\(no JVM in this process\); use 'auto'"):
        _join(spark, "index")
    assert _join(spark, "auto") == _expected()
    assert _join(spark, "broadcast") == _expected()
