"""What the runtime's tables collect in their Delta statistics: the output every column's bounds
(users query it, a later join reads its event times), a state table row counts only (the
engine reads it whole), a grace buffer the bounds of its event times (the UI's oldest and
newest held record)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.scenario import load_scenario
from joins.scenario.runner import prepare

pytestmark = pytest.mark.spark

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def replayed(name: str, module: Any, spark: Any, tmp_path: Path) -> Any:
    _definition, spec, records = prepare(load_scenario(SCENARIOS / f"{name}.json"))
    return module.ReplayLake(spark, spec, str(tmp_path)), records


def test_state_tables_count_rows_and_the_output_keeps_its_bounds(spark: Any, tmp_path: Path) -> None:
    from joins.operators.fk_join import spark_replay

    replay, records = replayed("004_lhs_steps_inner", spark_replay, spark, tmp_path)
    replay.land(records)
    replay.run()
    root = replay.join_root
    for table in ("lhs", "rhs", "subscriptions"):
        summary = lake.table_summary(f"{root}/{table}", columns=["_ts", "_batch_id"])
        assert summary is not None and summary.rows, table
        assert summary.min == summary.max == {}, f"{table}: bounds collected"
        assert lake.table_properties(f"{root}/{table}") == {
            "delta.checkpointInterval": "100", "delta.dataSkippingNumIndexedCols": "0"}
    output = lake.table_summary(f"{root}/output", columns=["ts", "_batch_id"])
    assert output is not None and output.rows
    assert set(output.min) == set(output.max) == {"ts", "_batch_id"}


def test_a_grace_buffer_keeps_the_bounds_of_its_event_times(spark: Any, tmp_path: Path) -> None:
    from joins.operators.stream_table_join import spark_replay

    replay, records = replayed("001_grace_buffer_example", spark_replay, spark, tmp_path)
    replay.land(records, batch=1)
    replay.run()
    summary = lake.table_summary(replay.paths.buffer, columns=["ts", "_seq"])
    assert summary is not None and summary.rows, "the scenario leaves records in the buffer"
    assert set(summary.min) == set(summary.max) == {"ts"}
    assert summary.min["ts"] <= summary.max["ts"]
