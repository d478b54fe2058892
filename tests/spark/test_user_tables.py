"""Inputs that are Delta tables a user names, in their own layout (`DeltaTableSource`): read
incrementally by version, arrival from the commit order, joined like the lake's own tables."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.errors import ConfigError
from joins.incremental import DeltaTableSource
from joins.operators.stream_table_join.backfill import backfill
from joins.operators.stream_table_join.columns import JoinColumns
from joins.operators.stream_table_join.spark_incremental import run_microbatch
from joins.operators.stream_table_join.spec import StreamTableJoinSpec
from joins.operators.stream_table_join.state import JoinPaths

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
SPEC = StreamTableJoinSpec.model_validate(
    {"join": "left", "table": {"versioned": True, "history_retention_ms": 10 * 86_400_000}})
COLS = JoinColumns(key="currency", table_key="currency", stream_values=("order", "amount"),
                   table_values=("rate",))


def _at(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def _orders(spark: Any, rows: list[tuple[str, str, float, int]]) -> Any:
    return spark.createDataFrame([(c, o, a, _at(m)) for c, o, a, m in rows],
                                 "currency string, order string, amount double, placed_at timestamp")


def _rates(spark: Any, rows: list[tuple[str, float, int]]) -> Any:
    return spark.createDataFrame([(c, r, _at(m)) for c, r, m in rows],
                                 "cur string, rate double, valid_from timestamp")


def test_user_tables_as_stream_and_versioned_table(spark: Any, tmp_path: Path) -> None:
    orders, rates = str(tmp_path / "orders"), str(tmp_path / "rates")
    lake.write_delta(_rates(spark, [("EUR", 1.0, 0), ("USD", 2.0, 0)]), rates)
    lake.write_delta(_orders(spark, [("EUR", "o1", 10.0, 5), ("USD", "o2", 20.0, 6)]), orders)
    stream = DeltaTableSource(orders, key=("currency",), ts="placed_at")
    table = DeltaTableSource(rates, key=("cur",), key_as=("currency",), ts="valid_from")
    paths = JoinPaths(str(tmp_path / "join"))
    first = run_microbatch(spark, SPEC, paths, stream_source=stream, table_source=table, columns=COLS)
    assert first.rows_out == 2
    # A new rate valid from minute 7, then an order at minute 8 and one (late) at minute 6.
    lake.write_delta(_rates(spark, [("EUR", 1.5, 7)]), rates)
    lake.write_delta(_orders(spark, [("EUR", "o3", 30.0, 8), ("EUR", "o4", 40.0, 6)]), orders)
    second = run_microbatch(spark, SPEC, paths, stream_source=stream, table_source=table, columns=COLS)
    assert second.rows_out == 2 and second.rows_in_table == 1
    rows = lake.read_delta(spark, paths.output).orderBy("order").collect()
    got = [(r["order"], r["table_rate"], r["ts"] - int(T0.timestamp() * 1000)) for r in rows]
    assert got == [("o1", 1.0, 300_000), ("o2", 2.0, 360_000), ("o3", 1.5, 480_000),
                   ("o4", 1.0, 360_000)]
    # Arrival is the commit order (version, file, row): o3 and o4 come after o1 and o2, and
    # carry the version of their commit. (Within a commit, files are in the log's order.)
    seq = {r["order"]: r["_seq"] for r in rows}
    assert max(seq["o1"], seq["o2"]) < min(seq["o3"], seq["o4"])
    assert {s >> 40 for s in seq.values()} == {0, 1}
    report = backfill(spark, SPEC, paths, stream_source=stream, table_source=table,
                      days=["2024-03-01"], columns=COLS)
    assert report.agrees and report.rows_in == 4


def test_a_user_table_is_read_as_an_append_only_changelog(spark: Any, tmp_path: Path) -> None:
    orders, rates = str(tmp_path / "orders"), str(tmp_path / "rates")
    lake.write_delta(_rates(spark, [("EUR", 1.0, 0)]), rates)
    lake.write_delta(_orders(spark, [("EUR", "o1", 10.0, 5)]), orders)
    paths = JoinPaths(str(tmp_path / "join"))
    bad = DeltaTableSource(orders, key=("currency",), ts="nope")
    table = DeltaTableSource(rates, key=("cur",), key_as=("currency",), ts="valid_from")
    with pytest.raises(ConfigError, match=r"the ts column 'nope' is not in the table"):
        run_microbatch(spark, SPEC, paths, stream_source=bad, table_source=table, columns=COLS)
    stream = DeltaTableSource(orders, key=("currency",), ts="placed_at")
    run_microbatch(spark, SPEC, paths, stream_source=stream, table_source=table, columns=COLS)
    lake.write_delta(_orders(spark, [("EUR", "o9", 1.0, 9)]), orders, mode="overwrite")
    with pytest.raises(lake.LakeError, match="removed data files"):
        run_microbatch(spark, SPEC, paths, stream_source=stream, table_source=table, columns=COLS)
