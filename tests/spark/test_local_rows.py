"""Rows the driver holds become a local relation (`joins.spark.local_rows`), not PySpark's
parallelized pickles that every reading job unpickles again in Python worker tasks; and the
micro-batches build none of the latter."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from joins.spark.local_rows import local_rows

pytestmark = pytest.mark.spark

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _plan(frame: Any) -> str:
    return str(frame._jdf.queryExecution().analyzed().nodeName())


def test_rows_round_trip_as_a_local_relation(spark: Any) -> None:
    rows = [(1, "a", 1.5, True, 7), (None, None, None, None, None), (-2, "", 0.0, False, 0)]
    frame = local_rows(spark, rows, "n long, s string, d double, b boolean, i int")
    assert _plan(frame) == "LocalRelation"
    assert [tuple(r) for r in frame.collect()] == rows
    assert frame.schema.simpleString() == "struct<n:bigint,s:string,d:double,b:boolean,i:int>"


def test_an_empty_frame_keeps_its_schema(spark: Any) -> None:
    frame = local_rows(spark, [], "k string, ts long")
    assert _plan(frame) == "LocalRelation"
    assert frame.count() == 0
    assert frame.columns == ["k", "ts"]


def test_a_row_of_the_wrong_width_is_named(spark: Any) -> None:
    with pytest.raises(ValueError, match=r"a row has 1 values for the 2 fields \['k', 'ts'\]: \('x',\)"):
        local_rows(spark, [("x", 1), ("x",)], "k string, ts long")


def test_a_value_of_the_wrong_type_names_its_field(spark: Any) -> None:
    with pytest.raises(ValueError, match=r"field 'ts' \(int64\): .*'soon'"):
        local_rows(spark, [("x", 1), ("y", "soon")], "k string, ts long")


def test_timestamps_keep_pysparks_reading(spark: Any) -> None:
    when = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)
    frame = local_rows(spark, [(when,)], "t timestamp")
    assert frame.collect()[0]["t"].replace(tzinfo=dt.UTC) == when


@pytest.mark.parametrize("name", ["003_join_full.json", "004_lhs_steps_inner.json",
                                  "001_grace_buffer_example.json",
                                  "000_table_table_outer_join_versioned.json"])
def test_a_replays_micro_batches_parallelize_no_python_rows(spark: Any, name: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every frame of driver rows a micro-batch builds is local: PySpark's createDataFrame of a
    list (Python worker tasks at every job that reads it) is never called."""
    from joins.scenario import load_scenario
    from joins.scenario.runner import run_scenario

    calls: list[str] = []
    original = SparkSession.createDataFrame

    def spy(self: SparkSession, data: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(data, list):
            calls.append(f"{len(data)} rows")
        return original(self, data, *args, **kwargs)

    monkeypatch.setattr(SparkSession, "createDataFrame", spy)
    items = run_scenario(load_scenario(SCENARIOS / name), "spark", batch_size=1)
    assert items, "the replay emitted nothing"
    assert calls == []
