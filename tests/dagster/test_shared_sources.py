"""Sources defined once (`kind: source` files) and read by many joins: one asset, one table, one
ingest, whichever joins name it; the errors a user meets writing them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from joins.errors import JoinsError
from joins.pipeline.files import load_spec_folder, resolved_spec
from pipelines.definitions import SPECS_DIR, build_definitions

ORDERS = yaml.safe_load((SPECS_DIR / "orders.yaml").read_text())
RATES_JOIN = yaml.safe_load((SPECS_DIR / "orders_with_rates.yaml").read_text())
DELIVERIES_JOIN = yaml.safe_load((SPECS_DIR / "orders_with_deliveries.yaml").read_text())


def _folder(tmp_path: Path, **files: dict[str, Any] | str) -> Path:
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
        (folder / f"{name}.yaml").write_text(text)
    return folder


def test_two_joins_read_one_source_asset(tmp_path: Path) -> None:
    folder = _folder(tmp_path, orders=ORDERS, rates_join=RATES_JOIN, deliveries_join=DELIVERIES_JOIN)
    loaded = load_spec_folder(folder)
    assert loaded.errors == ()
    use = loaded.sources["orders"]
    assert (use.storage.kind, use.readers) == ("events", ("orders_with_deliveries", "orders_with_rates"))
    defs = build_definitions(lake_root=str(tmp_path / "lake"), spec_dir=folder)
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    orders = graph.get(dg.AssetKey("orders"))
    assert orders.group_name == "sources"
    assert orders.child_keys >= {dg.AssetKey("orders_with_rates"), dg.AssetKey("orders_with_deliveries")}
    repo = defs.get_repository_def()
    assert [j for j in repo.job_names if j.startswith("orders_ingest")] == ["orders_ingest"]
    assert "orders_landing_sensor" in {s.name for s in repo.sensor_defs}
    # Each join reads the one table under its own key.
    rates, deliveries = (next(s for s in loaded.specs if s.name == n)
                         for n in ("orders_with_rates", "orders_with_deliveries"))
    assert rates.input("stream").source.key_column == "currency"
    assert deliveries.input("left").source.key_column == "order_id"
    assert use.input().source.key_column == "order_id"   # the ingest keeps the source's own key


def test_a_resolved_spec_is_the_join_with_its_source_inline() -> None:
    spec = resolved_spec(SPECS_DIR / "orders_with_rates.yaml")
    assert spec["stream"]["name"] == "orders"
    assert [c["name"] for c in spec["stream"]["key_columns"]] == ["currency"]
    assert [(c["name"], c["nullable"]) for c in spec["stream"]["value_columns"]] == [
        ("order_id", False), ("amount", True)]


def _error(tmp_path: Path, **files: dict[str, Any] | str) -> str:
    loaded = load_spec_folder(_folder(tmp_path, **files))
    assert len(loaded.errors) == 1, loaded.errors
    return str(loaded.errors[0])


def test_an_unknown_source_name_says_which_exist(tmp_path: Path) -> None:
    text = yaml.safe_dump({**RATES_JOIN, "stream": {"source": "ordres", "key_columns": ["currency"]}},
                          sort_keys=False)
    line = 1 + text.split("\n").index("stream:")
    message = _error(tmp_path, orders=ORDERS, join=text, other=DELIVERIES_JOIN)
    assert (f"join.yaml: stream_table_join spec 'orders_with_rates': invalid config: line {line + 1}, "
            f"config.stream.source: no source named 'ordres' (did you mean `orders`?)") in message


@pytest.mark.parametrize(("side", "expected"), [
    ({"source": "orders", "key_columns": ["amount"]},
     "config.stream.key_columns: 'amount' may be null in source 'orders'; a join key is never null"),
    ({"source": "orders", "key_columns": ["currenzy"]},
     "config.stream.key_columns: 'currenzy' is not a column of source 'orders' (did you mean "
     "`currency`?)"),
    ({"source": "orders", "key_columns": ["currency"], "format": "csv"},
     "config.stream.format: a setting of source 'orders'"),
    ({"source": "orders", "key_columns": ["currency"], "versioned": True},
     "config.stream.versioned: unknown key (not a setting of a join's side of a source)"),
])
def test_a_join_may_rekey_a_source_but_not_change_it(tmp_path: Path, side: dict[str, Any],
                                                       expected: str) -> None:
    message = _error(tmp_path, orders=ORDERS, join={**RATES_JOIN, "stream": side},
                     other=DELIVERIES_JOIN)
    assert expected in message


def test_two_joins_needing_different_storage_is_an_error_naming_both(tmp_path: Path) -> None:
    rates = {"kind": "source", **RATES_JOIN["table"]}
    first = {**RATES_JOIN, "table": "rates"}
    second = {**RATES_JOIN, "name": "trades_with_rates", "table": "rates",
              "history_retention_ms": 3 * 86_400_000,
              "stream": {"source": "orders", "key_columns": ["currency"]}}
    message = _error(tmp_path, orders=ORDERS, rates=rates, a_join=first, b_join=second)
    assert ("b_join.yaml: trades_with_rates: source 'rates' is read as a versioned table with "
            "history retention 1 day by 'orders_with_rates'; this join needs a versioned table "
            "with history retention 3 days") in message


def test_a_source_no_join_reads_is_reported(tmp_path: Path) -> None:
    message = _error(tmp_path, orders=ORDERS, lonely={**ORDERS, "name": "lonely"},
                     join=RATES_JOIN)
    assert ("lonely.yaml: source 'lonely' is read by no pipeline, so it is not ingested"
            in message)


def test_a_source_whose_only_reader_is_broken_names_that_file(tmp_path: Path) -> None:
    # The source is fine: its reader's own error is the one to fix.
    loaded = load_spec_folder(_folder(tmp_path, orders=ORDERS, join={**RATES_JOIN, "grace_ms": -1}))
    message = "\n".join(f"{e.path}: {e.message}" for e in loaded.errors)
    assert "join.yaml: stream_table_join spec 'orders_with_rates'" in message
    assert ("orders.yaml: source 'orders' is read by no pipeline that loaded (join.yaml names it "
            "but did not load") in message


def test_a_bad_source_file_names_its_line(tmp_path: Path) -> None:
    text = yaml.safe_dump({**ORDERS, "ts_colum": "ts"}, sort_keys=False)
    message = _error(tmp_path, orders=text)
    assert "orders.yaml: source 'orders': invalid config: line" in message
    assert "config.ts_colum: unknown key (not a setting of a source) (did you mean `ts_column`?)" in message


@pytest.mark.parametrize(("change", "line", "said"), [
    # Checks of several settings together name the setting they blame, and so its line.
    ({"format": "delta", "catalog_table": "sales.orders"}, 10,
     "config.catalog_table: give the Delta table by path (landing) or by name (catalog_table), not both"),
    ({"ts_min_ms": 5, "ts_max_ms": 3}, 10, "config.ts_min_ms: 5 is after ts_max_ms 3"),
])
def test_a_check_of_several_settings_names_a_line(tmp_path: Path, change: dict[str, Any],
                                                   line: int, said: str) -> None:
    source = {"kind": "source", "name": "orders", "landing": "/tmp/x", "format": "jsonl",
              "key_columns": [{"name": "id", "type": "string"}], "ts_column": "ts",
              "tombstone_column": "deleted"}
    message = _error(tmp_path, orders=yaml.safe_dump({**source, **change}, sort_keys=False))
    assert f"line {line}, {said}" in message, message


def test_load_spec_file_refuses_a_source_file() -> None:
    from joins.pipeline.files import load_spec_file

    with pytest.raises(JoinsError, match="a source file"):
        load_spec_file(SPECS_DIR / "orders.yaml")
