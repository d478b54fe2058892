"""Pipelines that publish some value columns under their own names (`select`, SQL's column list
and `AS`): a SQL query and its YAML twin write the same rows, with exactly the published
columns; the backfill of a projected join agrees with its micro-batches, and a batch or a day
of it is reproduced."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from joins.ingest import run_ingest
from joins.lake import table_schema
from joins.pipeline import PipelineLayout, load_spec_folder
from joins.pipeline.spec import PipelineSpec
from joins.reproduce import reproduce_batch, reproduce_day
from tests.dagster.test_sql_pipelines import SQL_SPECS, output_rows, run_once

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DAY = 86_400_000

# name -> (SQL, the YAML twin's settings besides its name and start date, published columns,
# value columns the operator writes that are not published).
CASES: dict[str, tuple[str, dict[str, Any], set[str], set[str]]] = {
    "rates_only": (
        "SET 'r.history_retention_ms' = 86400000;\n"
        "SELECT o.order_id, r.rate AS fx FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r "
        "ON o.currency = r.currency",
        {"operator": "stream_table_join", "stream": {"source": "orders", "key_columns": ["currency"]},
         "table": {"source": "rates"}, "join": "left", "history_retention_ms": 86400000,
         "select": ["order_id", {"column": "table_rate", "as": "fx"}]},
        {"currency", "order_id", "fx", "table_valid_from"}, {"amount", "table_rate"}),
    "delivered_by": (
        "SET 'o.lag_ms' = 0; SET 'd.lag_ms' = 0;\n"
        "SELECT o.order_id, d.courier AS courier FROM orders o JOIN deliveries d ON d.ts BETWEEN o.ts "
        "AND o.ts + INTERVAL '3' HOUR AND d.order_id = o.order_id",
        {"operator": "interval_join", "left": {"source": "orders"}, "right": {"source": "deliveries"},
         "condition": "deliveries.ts BETWEEN orders.ts AND orders.ts + INTERVAL '3' HOUR AND "
                      "deliveries.order_id = orders.order_id", "join": "inner",
         "left_lag_ms": 0, "right_lag_ms": 0,
         "select": [{"column": "orders_order_id", "as": "order_id"},
                    {"column": "deliveries_courier", "as": "courier"}]},
        {"order_id", "courier", "orders_ts", "deliveries_ts"},
        {"orders_order_id", "orders_amount", "deliveries_courier", "deliveries_delivery_id"}),
    "names_and_balances": (
        "SET 'c.history_retention_ms' = 86400000; SET 'a.history_retention_ms' = 86400000;\n"
        "SELECT c.name, a.balance AS balance FROM customers c JOIN accounts a ON c.customer_id = "
        "a.customer_id",
        {"operator": "table_table_join", "left": {"source": "customers", "history_retention_ms": DAY},
         "right": {"source": "accounts", "history_retention_ms": DAY}, "join": "inner",
         "select": [{"column": "left_name", "as": "name"}, {"column": "right_balance", "as": "balance"}]},
        {"customer_id", "name", "balance", "has_left", "has_right", "tombstone"},
        {"left_name", "left_country", "right_status", "right_balance"}),
    "order_names": (
        "SET 'o.history_retention_ms' = 86400000; SET 'c.history_retention_ms' = 86400000;\n"
        "SELECT o.amount AS total, c.name FROM order_updates o LEFT JOIN customers c ON "
        "o.customer_id = c.customer_id",
        {"operator": "fk_join", "left": {"source": "order_updates", "history_retention_ms": DAY},
         "right": {"source": "customers", "history_retention_ms": DAY},
         "foreign_key": "customer_id", "join": "left",
         "select": [{"column": "left_amount", "as": "total"}, {"column": "right_name", "as": "name"}]},
        {"order_id", "total", "name"}, {"left_amount", "left_customer_id", "right_name"}),
    "open_states": (
        "SELECT customer_id, status AS state FROM accounts WHERE status = 'open'",
        {"operator": "table_filter", "source": {"source": "accounts"},
         "predicate": {"field": "status", "op": "eq", "value": "open"}, "value_columns": ["status"],
         "select": [{"column": "status", "as": "state"}]},
        {"customer_id", "state", "old_state", "has_value"}, {"status", "old_status", "balance"}),
    "accounts_by_status": (
        "SELECT status, COUNT(*) AS accounts FROM accounts GROUP BY status",
        {"operator": "table_aggregate", "source": {"source": "accounts"}, "group_by": "status",
         "aggregate": {"function": "count"}, "select": [{"column": "count", "as": "accounts"}]},
        {"key", "accounts"}, {"count"}),
}


def _folder(path: Path, name: str, text: str, suffix: str) -> Path:
    path.mkdir()
    for source in SQL_SPECS.glob("*.yaml"):
        shutil.copy(source, path)
    (path / f"{name}.{suffix}").write_text(text)
    return path


def _sql(spark: Any, tmp_path: Path, name: str) -> tuple[PipelineSpec, PipelineLayout]:
    """Case `name` in SQL after one micro-batch."""
    text = f"SET 'start_date' = '2024-03-01';\n{CASES[name][0]}"
    return run_once(spark, _folder(tmp_path / "sql_specs", name, text, "sql"), tmp_path / "sql", name)


@pytest.mark.parametrize("name", CASES)
def test_a_projection_in_sql_writes_its_yaml_twins_rows_with_the_published_columns(
        spark: Any, tmp_path: Path, name: str) -> None:
    _, settings, published, dropped = CASES[name]
    yaml_text = json.dumps({"name": name, "start_date": "2024-03-01", **settings})
    sql_spec, sql_layout = _sql(spark, tmp_path, name)
    yaml_spec, yaml_layout = run_once(spark, _folder(tmp_path / "yaml_specs", name, yaml_text, "yaml"),
                                      tmp_path / "yaml", name)
    assert sql_spec == yaml_spec
    columns = set(table_schema(sql_layout.output).fieldNames())
    assert published <= columns and not dropped & columns, sorted(columns)
    rows = output_rows(spark, sql_layout)
    assert rows and rows == output_rows(spark, yaml_layout)
    # The published batch is what its plan recomputes.
    batch = reproduce_batch(spark, sql_spec.engine(sql_layout).runtime(), 0)
    assert batch.agrees and batch.rows_recomputed == len(rows), batch


def test_a_projected_stream_table_join_is_backfilled_and_reproduced_as_published(
        spark: Any, tmp_path: Path) -> None:
    spec, layout = _sql(spark, tmp_path, "rates_only")
    engine = spec.engine(layout)
    check = engine.backfill(spark, ["2024-03-01"], dry_run=True)
    day = check.per_day["2024-03-01"]
    assert day.before == day.after > 0 and day.agrees
    # A backfill that changes the day (its rows lose their micro-batch lineage) publishes the
    # same columns, and the day is reproduced from it.
    before = {r["order_id"]: r["fx"] for r in output_rows(spark, layout)}
    assert not engine.backfill(spark, ["2024-03-01"]).committed
    assert {r["order_id"]: r["fx"] for r in output_rows(spark, layout)} == before
    assert reproduce_day(spark, engine.runtime(), dt.date(2024, 3, 1)).agrees


def test_a_projected_table_join_publishes_its_history_so_and_still_agrees(
        spark: Any, tmp_path: Path) -> None:
    spec, layout = _sql(spark, tmp_path, "names_and_balances")
    engine = spec.engine(layout)
    assert engine.backfill(spark, ["2024-03-01"]).committed
    history = layout.join.sub("history")
    columns = set(table_schema(history).fieldNames())
    assert {"customer_id", "name", "balance", "valid_from", "valid_to"} <= columns
    assert not {"left_name", "left_country", "right_balance", "right_status"} & columns
    again = engine.backfill(spark, ["2024-03-01"], dry_run=True).per_day["2024-03-01"]
    assert again.after > 0 and again.agrees
    assert engine.consistency(spark).passed


def test_a_pipeline_over_a_projected_one_reads_the_published_names(spark: Any, tmp_path: Path) -> None:
    _, layout = _sql(spark, tmp_path, "names_and_balances")
    text = ("SET 'start_date' = '2024-03-01'; SET 'upstream_key' = 'customer_id';\n"
            "SELECT customer_id, name AS holder FROM names_and_balances WHERE balance > 10")
    (tmp_path / "sql_specs" / "rich.sql").write_text(text)
    rich = next(s for s in load_spec_folder(tmp_path / "sql_specs").specs if s.name == "rich")
    assert rich.engine(PipelineLayout(layout.root, rich)).microbatch(spark).rows_out > 0
    rows = output_rows(spark, PipelineLayout(layout.root, rich))
    # c1 (100.0) is in; c3's 7.5 is not; c2's account closed.
    assert {r["customer_id"]: r["holder"] for r in rows if r["has_value"]} == {"c1": "Ann B"}


def test_a_changed_list_applies_to_what_is_written_next_and_a_backfill_republishes(
        spark: Any, tmp_path: Path) -> None:
    from joins.pipeline.select import SelectedColumn

    spec, layout = _sql(spark, tmp_path, "rates_only")
    published = {r["order_id"]: r["fx"] for r in output_rows(spark, layout)}
    renamed = spec.model_copy(update={"select": (
        SelectedColumn(column="order_id"), SelectedColumn.model_validate({"column": "table_rate",
                                                                          "as": "rate"}))})
    relaid = PipelineLayout(layout.root, renamed)
    day = renamed.engine(relaid).backfill(spark, ["2024-03-01"])
    assert day.committed and day.per_day["2024-03-01"].changed > 0
    rows = output_rows(spark, relaid)
    # Delta kept the old column (null in the republished rows); the day now says `rate`.
    assert {"fx", "rate"} <= set(table_schema(relaid.output).fieldNames())
    assert {r["order_id"]: r["rate"] for r in rows} == published
    assert {r["fx"] for r in rows} == {None}
    # The next micro-batch's rows are published so too (the grace buffer's last order).
    more = Path(relaid.landing(renamed.input("stream").source)) / "0002.jsonl"
    more.write_text('{"order_id": "o9", "currency": "EUR", "amount": 1.0, "ts": 1709280000000}\n')
    run_ingest(spark, relaid.ingest_source(load_spec_folder(tmp_path / "sql_specs").sources[
        "orders"].input()))
    assert renamed.engine(relaid).microbatch(spark).rows_out > 0
    assert {r["order_id"]: r["rate"] for r in output_rows(spark, relaid)}.keys() > published.keys()
    # Batch 0 published `fx`; recomputed now it has `rate`: the columns both hold are compared.
    old = reproduce_batch(spark, renamed.engine(relaid).runtime(), 0)
    assert old.agrees and "order_id" in old.compared and not {"fx", "rate"} & set(old.compared)
    assert reproduce_day(spark, renamed.engine(relaid).runtime(), dt.date(2024, 3, 1)).agrees
