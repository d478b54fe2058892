"""The join spec and the factory: bad specs are refused with a message naming the key."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from assets.factory import build_pipeline_assets
from joins.errors import ConfigError
from joins.pipeline import parse_pipeline_spec


def test_demo_spec_builds_its_assets_and_a_microbatch_job(spec_dict: dict[str, Any]) -> None:
    ja = build_pipeline_assets(spec_dict)
    assert [a.key.path for a in ja.assets] == [
        ["rates"], ["orders"], ["orders_with_rates"], ["rates_landing"], ["orders_landing"],
        ["orders_with_rates_quarantine"], ["orders_with_rates_grace_buffer"]]
    assert ja.join.partitions_def is ja.partitions_def
    assert ja.join.backfill_policy is not None and ja.join.backfill_policy.max_partitions_per_run is None
    assert ja.input_asset("table").partitions_def is None and ja.input_asset("stream").partitions_def is None
    deps = ja.join.asset_deps[ja.join_key]
    assert {k.path[0] for k in deps} == {"rates", "orders"}
    assert ja.microbatch_job.name == "orders_with_rates_microbatch"
    # Without a lake to look at, the one partition is the spec's start date.
    assert ja.partitions_def.get_partition_keys() == ["2024-03-01"]


def test_engine_spec_carries_the_join_settings(spec_dict: dict[str, Any]) -> None:
    spec = parse_pipeline_spec(spec_dict)
    engine = spec.engine_spec()
    # The demo's YAML spells them `30 min` and `1 day`.
    assert (engine.join, engine.grace_ms, engine.late) == ("left", 1_800_000, "join")
    assert engine.table.versioned and engine.table.history_retention_ms == 86_400_000
    assert spec.start_date == dt.date(2024, 3, 1)


@pytest.mark.parametrize(("change", "key", "fragment"), [
    ({"grace_ms": 10 * 86_400_000}, "config.grace_ms", "must be <= history_retention_ms"),
    ({"grace_ms": None, "late": "drop"}, "config.late", "needs grace_ms"),
    ({"join": "outer"}, "config.join", "'inner' or 'left'"),
    ({"table_key": "amount"}, "config.table_key", "is double but the table key 'currency' is string"),
    ({"table_key": "nope"}, "config.table_key", "is not a value column of the stream 'orders'"),
    ({"name": "Orders With Rates"}, "config.name", "lower-case identifier"),
    ({"history_retention_ms": -1}, "config.history_retention_ms", "greater than or equal to 0"),
    ({"quarantine_threshold": 2}, "config.quarantine_threshold", "less than or equal to 1"),
    ({"start_date": "yesterday"}, "config.start_date", "date"),
    ({"unknown_setting": 1}, "config.unknown_setting", "unknown key"),
])
def test_bad_spec_is_refused_naming_the_key(spec_dict: dict[str, Any], change: dict[str, Any], key: str,
                                            fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_pipeline_assets({**spec_dict, **change})
    assert f"{key}: " in str(err.value) and fragment in str(err.value), str(err.value)


@pytest.mark.parametrize(("side", "change", "key", "fragment"), [
    ("stream", {"format": "xml"}, "config.stream.format", "'jsonl', 'csv', 'parquet' or 'delta'"),
    ("stream", {"tombstone_column": "deleted"}, "config.stream.tombstone_column", "a stream has no deletes"),
    ("table", {"key_columns": [{"name": "a", "type": "string"}, {"name": "b", "type": "string"}]},
     "config.table.key_columns", "one key column"),
    ("table", {"name": "orders"}, "config.stream.name", "need different names"),
    ("table", {"value_columns": [{"name": "rate", "type": "decimal"}]}, "config.table.value_columns.0.type",
     "'string', 'long', 'int', 'double' or 'boolean'"),
    ("stream", {"ts_column": None}, "config.stream.ts_column", "valid string"),
    # A check of several settings names the one it blames, so a spec file's message has its line.
    ("stream", {"catalog_table": "sales.orders"}, "config.stream.catalog_table",
     "names a Delta table, so it needs format: delta, not jsonl"),
    ("stream", {"format": "delta", "landing": "/t", "catalog_table": "sales.orders"},
     "config.stream.catalog_table", "by path (landing) or by name (catalog_table), not both"),
    ("stream", {"format": "delta", "catalog_table": "sales.orders; DROP TABLE x"},
     "config.stream.catalog_table", "is not a table name"),
    ("stream", {"format": "delta", "catalog_table": "a.b.c.d"}, "config.stream.catalog_table",
     "one to three identifiers"),
])
def test_bad_source_is_refused_naming_the_key(spec_dict: dict[str, Any], side: str, change: dict[str, Any],
                                              key: str, fragment: str) -> None:
    spec_dict[side] = {**spec_dict[side], **change}
    with pytest.raises(ConfigError) as err:
        build_pipeline_assets(spec_dict)
    assert f"{key}: " in str(err.value) and fragment in str(err.value), str(err.value)


@pytest.mark.parametrize("name", ["orders", "sales.orders", "main.sales.orders", "`my-db`.orders"])
def test_a_delta_source_may_be_named_in_the_catalog(spec_dict: dict[str, Any], name: str) -> None:
    from joins.pipeline.spec import SourceLayout

    spec_dict["stream"] = {**spec_dict["stream"], "format": "delta", "catalog_table": name}
    source = parse_pipeline_spec(spec_dict).stream
    assert source.catalog_table == name
    # Before an ingest run has resolved it, its location is not known (joins.ingest.catalog).
    assert SourceLayout("/nowhere").landing(source) == f"catalog:{name}"


def test_clashing_output_column_is_refused(spec_dict: dict[str, Any]) -> None:
    spec_dict["stream"]["value_columns"] = [*spec_dict["stream"]["value_columns"],
                                            {"name": "table_rate", "type": "double"}]
    with pytest.raises(ConfigError, match=r"config\.stream\.value_columns.*table_rate"):
        parse_pipeline_spec(spec_dict)


def test_landing_spec_is_what_the_engine_reads(spec_dict: dict[str, Any]) -> None:
    spec = parse_pipeline_spec(spec_dict)
    landing = spec.table.landing_spec()
    assert landing.format == "csv" and landing.key_names == ("currency",)
    assert landing.value_names == ("rate",) and landing.on_bad_record == "quarantine"
