"""A pipeline's `select` (the value columns its output publishes, SQL's column list and `AS`):
checked against the operator's value columns when the spec loads, and the renames the runtime
applies (`joins.incremental.projection`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from joins.errors import ConfigError
from joins.incremental.projection import OutputValue, Projection
from joins.pipeline import load_spec_folder
from joins.pipeline.spec import PipelineSpec

SQL_SPECS = Path(__file__).resolve().parents[1] / "pipelines" / "specs_sql"
RATES = """operator: stream_table_join
name: orders_with_rates
stream: {source: orders, key_columns: [currency]}
table: rates
history_retention_ms: 86400000
start_date: 2024-03-01
"""


def _load(tmp_path: Path, text: str, **changes: object) -> PipelineSpec:
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    for source in SQL_SPECS.glob("*.yaml"):
        shutil.copy(source, folder)
    raw = {**yaml.safe_load(text), **changes}
    (folder / f"{raw['name']}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    loaded = load_spec_folder(folder)
    mine = [e for e in loaded.errors if e.name == raw["name"]]
    if mine:
        raise ConfigError(mine[0].message)
    return next(s for s in loaded.specs if s.name == raw["name"])


def test_select_publishes_value_columns_under_their_names(tmp_path: Path) -> None:
    spec = _load(tmp_path, RATES, select=["amount", {"column": "table_rate", "as": "rate"}])
    projection = spec.projection()
    assert projection is not None
    assert projection.renames() == {"order_id": None, "amount": "amount", "table_rate": "rate"}
    # Written `{column: x, as: x}` or `x`, it is one spec.
    assert spec == _load(tmp_path, RATES, select=[{"column": "amount", "as": "amount"},
                                                   {"column": "table_rate", "as": "rate"}])
    assert _load(tmp_path, RATES).projection() is None


@pytest.mark.parametrize(("select", "message"), [
    (["table_rat"], "config.select.0.column: 'table_rat' is not a value column of the output (did you "
                    "mean `table_rate`?) (its value columns: order_id, amount, table_rate)"),
    (["currency"], "config.select.0.column: 'currency' is the output's key or event time: it comes "
                   "along under its own name"),
    ([{"column": "amount", "as": "rate"}, {"column": "table_rate", "as": "rate"}],
     "config.select.1: two columns are published as 'rate' (entries 0 and 1)"),
    ([{"column": "amount", "as": "ts"}], "config.select.0.as: 'ts' is a column the operator writes "
                                         "itself; choose another name"),
    ([{"column": "amount", "as": "_amount"}], "config.select.0.as: '_amount' is not a column name"),
    ([], "config.select: list at least one value column"),
])
def test_what_cannot_be_published_is_refused_naming_the_entry(tmp_path: Path, select: object,
                                                              message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, RATES, select=select)
    assert message in str(info.value)


def test_each_operator_names_its_value_columns(tmp_path: Path) -> None:
    specs = {s.name: s for s in load_spec_folder(SQL_SPECS).specs}
    values = {name: [v.name for v in s.output_values()] for name, s in specs.items()}
    assert values == {
        "orders_with_rates": ["order_id", "amount", "table_rate"],
        "orders_with_deliveries": ["orders_order_id", "orders_currency", "orders_amount",
                                   "deliveries_delivery_id", "deliveries_order_id",
                                   "deliveries_courier"],
        "customer_accounts": ["left_name", "left_country", "right_balance", "right_status"],
        "orders_with_customer": ["left_customer_id", "left_amount", "right_name", "right_country"],
        "accounts_per_country": ["count"]}


def test_a_map_lists_its_columns_in_columns_not_in_select(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the map's `columns` are its projection"):
        _load(tmp_path, "operator: table_map\nname: m\nsource: accounts\ncolumns: [status]\n"
                        "start_date: 2024-03-01\n", select=["status"])


def test_twins_follow_their_column() -> None:
    """The filter's `old_<column>` and the sum's exact `<column>_int` are renamed and dropped
    with it; columns that are no values pass; what a backfill compares is renamed alike."""
    projection = Projection((OutputValue("status", ("old_{}",)), OutputValue("balance", ("old_{}",))),
                            (("status", "state"),))
    assert projection.renames() == {"status": "state", "old_status": "old_state",
                                    "balance": None, "old_balance": None}
    assert projection.names(["customer_id", "status", "old_status", "balance", "ts"]) == (
        "customer_id", "state", "old_state", "ts")
    with pytest.raises(ConfigError, match=r"\['nope'\] are not value columns"):
        Projection((OutputValue("status"),), (("nope", "x"),))


def test_the_join_asset_shows_what_it_publishes(tmp_path: Path) -> None:
    import dagster as dg

    from pipelines.definitions import build_definitions

    _load(tmp_path, RATES, select=["amount", {"column": "table_rate", "as": "rate"}])
    defs = build_definitions(lake_root=str(tmp_path / "lake"), spec_dir=tmp_path / "specs")
    metadata = defs.resolve_asset_graph().get(dg.AssetKey("orders_with_rates")).metadata
    assert metadata["select"] == "amount, table_rate AS rate"
