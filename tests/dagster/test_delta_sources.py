"""A pipeline whose inputs are a user's Delta tables, written with plain PySpark + delta-spark
(`format: delta` sources, no Python of the project's): the rates table has its change data feed
on, an UPDATE and a DELETE; the orders table is append-only without it. Through the Dagster
definitions: the source assets ingest the tables' new versions, the micro-batch job joins them,
a second run takes only what is new, and the rows are the ones the seeds' rules give. The same
with the tables named in Spark's catalog (`catalog_table`) instead of by path."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets
from joins.lake import read_delta
from pipelines.definitions import DEMO_SPEC, build_definitions
from resources import LakeResource, SparkResource
from tests.dagster.instances import memory_instance

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
MINUTE = 60_000
# Event times near now: a delete's event time is its commit's time (joins.landing.delta_cells),
# so the tables' own times must be of the same clock for the history retention (one day).
T0 = (int(time.time() * 1000) // MINUTE - 180) * MINUTE


def _ts(minutes: int) -> dt.datetime:
    return dt.datetime.fromtimestamp((T0 + minutes * MINUTE) / 1000, dt.UTC)


def _spec(rates: Path, orders: Path) -> dict[str, Any]:
    columns = {"key_columns": [{"name": "currency", "type": "string"}]}
    return {**DEMO_SPEC,
            "start_date": _ts(0).date().isoformat(),
            "stream": {**DEMO_SPEC["stream"], "format": "delta", "landing": str(orders)},
            "table": {"name": "rates", "format": "delta", "landing": str(rates), **columns,
                      "value_columns": [{"name": "rate", "type": "double"}],
                      "ts_column": "updated_at", "on_bad_record": "quarantine"}}


def _append_orders(spark: Any, path: Path, rows: list[tuple[str, str, float, int]]) -> None:
    frame = spark.createDataFrame([(c, o, a, T0 + m * MINUTE) for c, o, a, m in rows],
                                  "currency string, order_id string, amount double, ts long")
    frame.coalesce(1).write.format("delta").mode("append").save(str(path))


def test_delta_tables_feed_a_stream_table_join_through_dagster(spark, tmp_path: Path) -> None:
    rates, orders = tmp_path / "user" / "rates", tmp_path / "user" / "orders"
    spark.sql(f"CREATE TABLE delta.`{rates}` (currency STRING, rate DOUBLE, updated_at TIMESTAMP) "
              "USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
              "'delta.enableDeletionVectors' = 'true')")
    spark.createDataFrame([("EUR", 1.08, _ts(0)), ("USD", 1.0, _ts(0)), ("GBP", 0.8, _ts(0))],
                          "currency string, rate double, updated_at timestamp") \
        .write.format("delta").mode("append").save(str(rates))
    spark.sql(f"UPDATE delta.`{rates}` SET rate = 1.10, updated_at = TIMESTAMP'{_ts(30):%Y-%m-%d %H:%M:%S}' "
              "WHERE currency = 'EUR'")
    _append_orders(spark, orders, [("EUR", "o1", 10.0, 10), ("EUR", "o2", 20.0, 40),
                                   ("GBP", "o3", 30.0, 50), ("USD", "o4", 40.0, 60)])

    spec = _spec(rates, orders)
    root = tmp_path / "lake"
    resources = {"spark": SparkResource(shuffle_partitions=2), "lake": LakeResource(root=str(root))}
    ja = build_pipeline_assets(spec)
    defs = build_definitions([spec], lake_root=str(root), spark=resources["spark"])
    microbatch = defs.resolve_job_def(ja.microbatch_job_name)
    output = root / "joins" / "orders_with_rates" / "output"

    def run() -> list[tuple[Any, ...]]:
        ingest = dg.materialize(ja.assets[:2], resources=resources, instance=instance,
                                run_config=QUIET)
        assert ingest.success
        assert microbatch.execute_in_process(instance=instance, run_config=QUIET).success
        return sorted((r["order_id"], r["ts"] - T0, r["table_rate"])
                      for r in read_delta(spark, str(output)).collect())

    with memory_instance() as instance:
        # o4 sets the stream time at 60 min; a grace of 30 min releases o1 only.
        assert run() == [("o1", 10 * MINUTE, 1.08)]

        spark.sql(f"DELETE FROM delta.`{rates}` WHERE currency = 'GBP'")
        _append_orders(spark, orders, [("USD", "o5", 50.0, 200)])
        # Nothing read twice. o5 moves the stream time to 200 min: o2 joins EUR's updated rate,
        # o3 the GBP rate valid at its time (the delete is later: at its commit's time, now), o4
        # the USD rate; o5 waits in the grace buffer.
        assert run() == [("o1", 10 * MINUTE, 1.08), ("o2", 40 * MINUTE, 1.10),
                         ("o3", 50 * MINUTE, 0.8), ("o4", 60 * MINUTE, 1.0)]
        table = read_delta(spark, str(root / "tables" / "rates"))
        assert table.where("currency = 'GBP' AND tombstone").count() == 1


def test_catalog_tables_feed_an_interval_join_through_dagster(spark, tmp_path: Path) -> None:
    """Orders (append-only) and deliveries (the change data feed on) as Delta tables named in
    Spark's catalog (`catalog_table`): each order with the deliveries within three hours after
    it, an order without one emitted alone once the deliveries' watermark has passed it. The
    landing sensor, which has no Spark, asks for a run to resolve a name it has not seen
    resolved, then watches the recorded location's versions."""
    from joins.pipeline.files import resolved_spec
    from pipelines.definitions import SPECS_DIR

    db = f"tj_user_{tmp_path.name}".replace("-", "_")
    orders, deliveries = tmp_path / "user" / "orders", tmp_path / "user" / "deliveries"
    spark.sql(f"CREATE DATABASE {db} LOCATION '{tmp_path / 'warehouse'}'")
    spark.sql(f"CREATE TABLE {db}.orders (currency STRING, order_id STRING, amount DOUBLE, "
              f"ts BIGINT) USING delta LOCATION '{orders}'")
    _append_orders(spark, orders, [("EUR", "o1", 10.0, 0), ("USD", "o2", 20.0, 30),
                                   ("EUR", "o3", 30.0, 60)])
    spark.sql(f"CREATE TABLE {db}.deliveries (delivery_id STRING, order_id STRING, "
              f"courier STRING, ts BIGINT) USING delta LOCATION '{deliveries}' "
              "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    spark.createDataFrame([("d1", "o1", "ann", T0 + 60 * MINUTE), ("d2", "o2", "bo", T0 + 400 * MINUTE),
                           ("d3", "o3", "cy", T0 + 90 * MINUTE), ("d9", "o9", "x", T0 + 500 * MINUTE)],
                          "delivery_id string, order_id string, courier string, ts long") \
        .write.format("delta").mode("append").save(str(deliveries))
    base = resolved_spec(SPECS_DIR / "orders_with_deliveries.yaml")
    spec = {**base, "start_date": _ts(0).date().isoformat(),
            "left": {**base["left"], "format": "delta", "catalog_table": f"{db}.orders"},
            "right": {**base["right"], "format": "delta", "catalog_table": f"{db}.deliveries"}}
    root = tmp_path / "lake"
    resources = {"spark": SparkResource(shuffle_partitions=2), "lake": LakeResource(root=str(root))}
    ja = build_pipeline_assets(spec)
    defs = build_definitions([spec], lake_root=str(root), spark=resources["spark"])

    def tick(instance: dg.DagsterInstance) -> Any:
        sensor = defs.resolve_sensor_def("orders_landing_sensor")
        with dg.build_sensor_context(instance=instance, sensor_name=sensor.name,
                                     resources={"lake": resources["lake"]}) as context:
            return sensor.evaluate_tick(context)

    try:
        with memory_instance() as instance:
            [resolve] = tick(instance).run_requests
            assert resolve.run_config == {"ops": {"orders": {"config": {"files": []}}}}
            assert resolve.run_key.startswith("orders:resolve-catalog-table:")
            assert dg.materialize(ja.assets[:2], resources=resources, instance=instance,
                                  run_config=QUIET).success
            assert tick(instance).skip_message == f"no new files in {orders}"
            job = defs.resolve_job_def(ja.microbatch_job_name)
            assert job.execute_in_process(instance=instance, run_config=QUIET).success
            _append_orders(spark, orders, [("GBP", "o4", 5.0, 90)])
            [new] = tick(instance).run_requests
            assert new.run_config == {"ops": {"orders": {"config": {
                "files": ["v00000000000000000002"]}}}}
    finally:
        spark.sql(f"DROP DATABASE {db} CASCADE")
    output = read_delta(spark, str(root / "joins" / "orders_with_deliveries" / "output"))
    pairs = sorted((r["orders_order_id"], r["deliveries_delivery_id"])
                   for r in output.where("orders_order_id IS NOT NULL").collect())
    # o1-d1 and o3-d3 within three hours; d2 is 370 min after o2: o2 is emitted alone once the
    # deliveries' watermark (500 min - 30 min) has passed o2's window.
    assert pairs == [("o1", "d1"), ("o2", None), ("o3", "d3")]
