"""SQL pipelines (`*.sql` in the specs folder) are their YAML twins: the same spec objects, the
same Definitions (assets, checks, jobs, sensors, schedules), the same rows when run; a broken
SQL file shows up as a broken YAML file does (a red asset, `./tj check`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from joins.ingest import run_ingest
from joins.lake import read_delta
from joins.pipeline import PipelineLayout, load_spec_folder, parse_pipeline_spec
from joins.pipeline.files import LoadedSpecs, resolved_spec
from joins.pipeline.spec import PipelineSpec
from pipelines.definitions import DEMO_SPEC, SPECS_DIR, build_definitions

SQL_SPECS = SPECS_DIR.parent / "specs_sql"
DEMO = ("orders_with_rates", "orders_with_deliveries", "customer_accounts", "accounts_per_country",
        "orders_with_customer")


def _spec(loaded: LoadedSpecs, name: str) -> PipelineSpec:
    assert loaded.errors == (), loaded.errors
    return next(s for s in loaded.specs if s.name == name)


@pytest.mark.parametrize("name", DEMO)
def test_each_demo_pipeline_in_sql_is_its_yaml_spec(name: str) -> None:
    sql, yaml_ = load_spec_folder(SQL_SPECS), load_spec_folder(SPECS_DIR)
    assert sql.files[name].endswith(f"specs_sql/{name}.sql")
    assert _spec(sql, name) == _spec(yaml_, name)


def test_a_resolved_sql_spec_is_the_demo_spec() -> None:
    """The one self-contained mapping Python callers build a pipeline from, from either file:
    the same spec once parsed (the YAML spells its durations, `30 min`; the SQL's intervals
    resolve to milliseconds)."""
    sql = resolved_spec(SQL_SPECS / "orders_with_rates.sql")
    assert sql["grace_ms"] == 1_800_000 and DEMO_SPEC["grace_ms"] == "30 min"
    assert parse_pipeline_spec(sql) == parse_pipeline_spec(DEMO_SPEC)


def _shape(defs: dg.Definitions) -> dict[str, Any]:
    """What a user sees of a code location: assets (group, description, upstream), checks,
    jobs, sensors, schedules."""
    graph = defs.resolve_asset_graph()
    repo = defs.get_repository_def()
    assets = {k.to_user_string(): (graph.get(k).group_name, graph.get(k).description,
                                   sorted(p.to_user_string() for p in graph.get(k).parent_keys))
              for k in graph.get_all_asset_keys()}
    return {"assets": assets,
            "checks": sorted(k.to_user_string() for k in graph.asset_check_keys),
            "jobs": sorted(repo.job_names), "sensors": sorted(s.name for s in repo.sensor_defs),
            "schedules": sorted(s.name for s in repo.schedule_defs)}


def _yaml_twins(folder: Path) -> Path:
    """The demo's YAML files reading the SQL folder's sources: a source the YAML demo declares
    inline (an asset of the join's group) is a `kind: source` file there (of the `sources`
    group), the one difference of the two folders that is not about SQL."""
    folder.mkdir()
    for source in SQL_SPECS.glob("*.yaml"):
        shutil.copy(source, folder)
    for name in DEMO:
        raw = yaml.safe_load((SPECS_DIR / f"{name}.yaml").read_text())
        for role in ("stream", "table", "left", "right", "source"):
            side = raw.get(role)
            if isinstance(side, dict) and "name" in side:
                raw[role] = {"source": side["name"], **{k: v for k, v in side.items()
                                                        if k in ("versioned", "history_retention_ms")}}
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return folder


def test_the_sql_folder_makes_the_yaml_folders_definitions(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    sql = build_definitions(lake_root=lake, spec_dir=SQL_SPECS)
    dg.Definitions.validate_loadable(sql)
    twins = build_definitions(lake_root=lake, spec_dir=_yaml_twins(tmp_path / "yaml"))
    assert _shape(sql) == _shape(twins)
    shape = _shape(sql)
    assert {"orders_with_rates_microbatch", "customer_accounts_microbatch",
            "rates_ingest"} <= set(shape["jobs"])
    assert "orders_with_rates_nightly_backfill" in shape["schedules"]
    # Each join's page links the file it was read from.
    for defs, folder, suffix in ((sql, SQL_SPECS, "sql"), (twins, tmp_path / "yaml", "yaml")):
        join = defs.resolve_asset_graph().get(dg.AssetKey("customer_accounts"))
        assert join.metadata["spec_file"].path == str(folder / f"customer_accounts.{suffix}")
        [reference] = join.metadata["dagster/code_references"].code_references
        assert reference.file_path == str(folder / f"customer_accounts.{suffix}")
        assert reference.label == f"pipeline spec ({suffix.upper()})"
    assert "orders_with_rates.backfill_agrees_with_stream" in " ".join(shape["checks"]).replace(
        "orders_with_rates:", "orders_with_rates.")


FILTER_YAML = """operator: table_filter
name: open_accounts
source: accounts
versioned: true
history_retention_ms: 3600000
predicate: {field: status, op: in, value: [open, frozen]}
value_columns: [status]
start_date: 2024-03-01
"""
FILTER_SQL = """SET 'accounts.versioned' = TRUE;
SET 'accounts.history_retention_ms' = INTERVAL '1' HOUR;
SET 'start_date' = '2024-03-01';
INSERT INTO open_accounts
SELECT customer_id, status FROM accounts WHERE status IN ('open', 'frozen');
"""
MAP_YAML = """operator: table_map
name: account_amounts
source: accounts
columns: [status, {field: balance, as: amount}]
start_date: 2024-03-01
"""
MAP_SQL = """SET 'start_date' = '2024-03-01';
INSERT INTO account_amounts
SELECT customer_id, status, balance AS amount FROM accounts;
"""
SUM_YAML = """operator: table_aggregate
name: balance_per_status
source: accounts
group_by: status
aggregate: {function: sum, field: balance}
start_date: 2024-03-01
"""
SUM_SQL = """SET 'start_date' = '2024-03-01';
SELECT status, SUM(balance) FROM accounts GROUP BY status;
"""


def _folder(path: Path, **files: str) -> Path:
    path.mkdir()
    shutil.copy(SQL_SPECS / "accounts.yaml", path)
    for name, text in files.items():
        (path / name).write_text(text)
    return path


@pytest.mark.parametrize(("name", "yaml_text", "sql_text"), [
    ("open_accounts", FILTER_YAML, FILTER_SQL), ("account_amounts", MAP_YAML, MAP_SQL),
    ("balance_per_status", SUM_YAML, SUM_SQL)])
def test_a_filter_a_map_and_an_aggregate_in_sql_are_their_yaml_twins(tmp_path: Path, name: str,
                                                               yaml_text: str, sql_text: str) -> None:
    yaml_dir = _folder(tmp_path / "yaml", **{f"{name}.yaml": yaml_text})
    sql_dir = _folder(tmp_path / "sql", **{f"{name}.sql": sql_text})
    assert _spec(load_spec_folder(sql_dir), name) == _spec(load_spec_folder(yaml_dir), name)
    lake = str(tmp_path / "lake")
    assert _shape(build_definitions(lake_root=lake, spec_dir=sql_dir)) == _shape(
        build_definitions(lake_root=lake, spec_dir=yaml_dir))


BROKEN = """SET 'start_date' = '2024-03-01';
SELECT *
FROM orders o JOIN deliveries d ON d.courier = o.currency;
"""


def test_a_broken_sql_file_is_a_red_asset_and_a_check_error(tmp_path: Path, capsys) -> None:
    from joins.cli import EXIT_INVALID, main

    folder = tmp_path / "specs"
    shutil.copytree(SQL_SPECS, folder)
    (folder / "stream_join.sql").write_text(BROKEN)
    message = ("stream_join.sql: line 3, column 36: 'd.courier = o.currency': d.courier is not the "
               "primary key of 'deliveries' (delivery_id); a join without a time bound or a FOR "
               "SYSTEM_TIME AS OF clause has unbounded state")
    defs = build_definitions(lake_root=str(tmp_path / "lake"), spec_dir=folder)
    assert message in (defs.resolve_sensor_def("spec_errors").description or "")
    broken = defs.resolve_asset_graph().get(dg.AssetKey("stream_join"))
    assert broken.group_name == "spec_errors"
    assert "stream_join.sql` did not load** (line 3)" in (broken.description or "")
    assert "sql" in broken.kinds
    assert main(["check", str(folder)]) == EXIT_INVALID
    captured = capsys.readouterr()
    assert message in captured.err
    assert "ok     " + str(folder / "orders_with_rates.sql") in captured.out
    assert "12 spec file(s): 11 ok, 1 with errors" in captured.err


def _jsonl(records: list[dict[str, Any]]) -> str:
    return "\n".join(map(json.dumps, records)) + "\n"


HOUR = 3_600_000
T0 = 1709251200000
ORDERS = [{"order_id": f"o{i}", "currency": c, "amount": 10.0 * i, "ts": 1709251200000 + i * HOUR}
          for i, c in enumerate(["EUR", "USD", "EUR", "GBP", "EUR", "USD"])]
LANDED = {
    "orders": ("0001.jsonl", _jsonl(ORDERS)),
    "rates": ("0001.csv", "currency,rate,ts\nEUR,1.08,1709251200000\nUSD,1.0,1709251200000\n"
                          "EUR,1.10,1709262000000\nUSD,0.99,1709258400000\n"),
    "deliveries": ("0001.jsonl", _jsonl([
        {"delivery_id": f"d{i}", "order_id": f"o{i}", "courier": "c", "ts": o["ts"] + i * HOUR}
        for i, o in enumerate(ORDERS)])),
    # Changelogs with an update out of order (c1's at 2 h after its 3 h one), deletes, a foreign
    # key that moves (o1: c1 -> c2) and one with no customer (o3).
    "customers": ("0001.jsonl", _jsonl([
        {"customer_id": "c1", "name": "Ann", "country": "DE", "deleted": False, "ts": T0},
        {"customer_id": "c2", "name": "Bo", "country": "FR", "deleted": False, "ts": T0 + HOUR},
        {"customer_id": "c1", "name": "Ann B", "country": "DE", "deleted": False, "ts": T0 + 3 * HOUR},
        {"customer_id": "c1", "name": "Ann A", "country": "AT", "deleted": False, "ts": T0 + 2 * HOUR},
        {"customer_id": "c3", "name": "Cy", "country": "IT", "deleted": False, "ts": T0 + HOUR},
        {"customer_id": "c3", "name": None, "country": None, "deleted": True, "ts": T0 + 4 * HOUR}])),
    "accounts": ("0001.csv", "customer_id,balance,status,ts,closed\n"
                             f"c1,100.0,open,{T0 + HOUR // 2},false\n"
                             f"c2,50.0,open,{T0 + HOUR},false\n"
                             f"c3,7.5,open,{T0 + 2 * HOUR},false\n"
                             f"c2,,,{T0 + 5 * HOUR},true\n"),
    "order_updates": ("0001.jsonl", _jsonl([
        {"order_id": "o1", "customer_id": "c1", "amount": 10.0, "cancelled": False, "ts": T0},
        {"order_id": "o2", "customer_id": "c2", "amount": 20.0, "cancelled": False, "ts": T0 + HOUR},
        {"order_id": "o3", "customer_id": "c9", "amount": 30.0, "cancelled": False, "ts": T0 + 2 * HOUR},
        {"order_id": "o1", "customer_id": "c2", "amount": 11.0, "cancelled": False, "ts": T0 + 3 * HOUR},
        {"order_id": "o2", "customer_id": None, "amount": None, "cancelled": True, "ts": T0 + 4 * HOUR}])),
}


def run_once(spark: Any, folder: Path, root: Path, name: str) -> tuple[PipelineSpec, PipelineLayout]:
    """Pipeline `name` of `folder` after one micro-batch over `LANDED` (the engine sees only the
    spec, so what matters is the spec and how its sources are ingested: shared in the SQL
    folder, partly inline in the YAML one)."""
    loaded = load_spec_folder(folder)
    assert [e for e in loaded.errors if e.name == name] == []   # (unread sources are errors too)
    spec = next(s for s in loaded.specs if s.name == name)
    layout = PipelineLayout(str(root), spec)
    for item in spec.pipeline_inputs():
        assert item.source is not None
        landing = Path(layout.landing(item.source))
        landing.mkdir(parents=True)
        file, text = LANDED[item.name]
        (landing / file).write_text(text)
        # A shared source is ingested under its own key, as the code location does.
        use = loaded.sources.get(item.name)
        run_ingest(spark, layout.ingest_source(use.input() if use is not None else item))
    assert not spec.engine(layout).microbatch(spark).skipped
    return spec, layout


def output_rows(spark: Any, layout: PipelineLayout) -> list[dict[str, Any]]:
    return sorted((r.asDict() for r in read_delta(spark, layout.output).collect()),
                  key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _rows(spark: Any, folder: Path, root: Path, name: str) -> list[dict[str, Any]]:
    return output_rows(spark, run_once(spark, folder, root, name)[1])


@pytest.mark.spark
@pytest.mark.slow
def test_the_stream_table_join_in_sql_writes_the_yaml_twins_rows(spark: Any, tmp_path: Path) -> None:
    sql = _rows(spark, SQL_SPECS, tmp_path / "sql", "orders_with_rates")
    # The last order waits in the grace buffer (half an hour past the stream time it sets).
    assert sorted(r["order_id"] for r in sql) == ["o0", "o1", "o2", "o3", "o4"]
    assert sql == _rows(spark, SPECS_DIR, tmp_path / "yaml", "orders_with_rates")
    assert {r["order_id"]: r["table_rate"] for r in sql}["o4"] == 1.10


@pytest.mark.spark
@pytest.mark.slow
def test_the_interval_join_in_sql_writes_the_yaml_twins_rows(spark: Any, tmp_path: Path) -> None:
    sql = _rows(spark, SQL_SPECS, tmp_path / "sql", "orders_with_deliveries")
    # Deliveries d0..d3 come within three hours of their order; d4, d5 do not (yet: the left
    # join emits their orders alone once the watermark has passed them).
    matched = {r["orders_order_id"]: r["deliveries_delivery_id"] for r in sql}
    assert {k: v for k, v in matched.items() if v is not None} == {f"o{i}": f"d{i}" for i in range(4)}
    assert sql == _rows(spark, SPECS_DIR, tmp_path / "yaml", "orders_with_deliveries")


@pytest.mark.spark
@pytest.mark.slow
def test_the_table_table_join_in_sql_writes_the_yaml_twins_rows(spark: Any, tmp_path: Path) -> None:
    sql = _rows(spark, SQL_SPECS, tmp_path / "sql", "customer_accounts")
    # c1's out-of-order update (2 h, after its 3 h one) changes nothing; c2's account closed and
    # c3 deleted: their results are tombstones.
    assert {r["customer_id"]: (r["left_name"], r["right_balance"], r["tombstone"]) for r in sql} \
        == {"c1": ("Ann B", 100.0, False), "c2": (None, None, True), "c3": (None, None, True)}
    assert sql == _rows(spark, SPECS_DIR, tmp_path / "yaml", "customer_accounts")


@pytest.mark.spark
@pytest.mark.slow
def test_the_foreign_key_join_in_sql_writes_the_yaml_twins_rows(spark: Any, tmp_path: Path) -> None:
    sql = _rows(spark, SQL_SPECS, tmp_path / "sql", "orders_with_customer")
    # o1's foreign key moved to c2; o2 cancelled; o3's customer does not exist (a left join).
    assert {r["order_id"]: (r["left_customer_id"], r["right_name"], r["tombstone"]) for r in sql} \
        == {"o1": ("c2", "Bo", False), "o2": (None, None, True), "o3": ("c9", None, False)}
    assert sql == _rows(spark, SPECS_DIR, tmp_path / "yaml", "orders_with_customer")


def test_a_sql_pipeline_repeating_a_name_is_refused_at_its_insert_into(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    shutil.copytree(SQL_SPECS, folder)
    shutil.copy(folder / "orders_with_rates.sql", folder / "copy.sql")
    errors = [str(e) for e in load_spec_folder(folder).errors]
    assert errors == [f"{folder / 'orders_with_rates.sql'}: line 12, column 13, config.name: "
                      f"['orders_with_rates'] already defined by another spec; pipeline and "
                      f"source names must be unique"]


# What each writes after one micro-batch over `LANDED["accounts"]`: c2's account closes at 5 h.
FILTER_AND_SUM_ROWS = {
    # Per key: its value (None: not in the filter's result, a delete), the filter applied.
    "open_accounts": (lambda r: (r["customer_id"], r["status"] if r["has_value"] else None),
                      {("c1", "open"), ("c2", None), ("c3", "open")}),
    # Per key: its mapped value (None: deleted), balance renamed.
    "account_amounts": (lambda r: (r["customer_id"], r["status"], r["amount"], r["has_value"]),
                        {("c1", "open", 100.0, True), ("c2", None, None, False),
                         ("c3", "open", 7.5, True)}),
    # Per status: the sum of the balances of the accounts that hold it (c1's 100 and c3's 7.5).
    "balance_per_status": (lambda r: (r["key"], r["sum"], r["tombstone"]), {("open", 107.5, False)}),
}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(("name", "yaml_text", "sql_text"), [
    ("open_accounts", FILTER_YAML, FILTER_SQL), ("account_amounts", MAP_YAML, MAP_SQL),
    ("balance_per_status", SUM_YAML, SUM_SQL)], ids=["filter", "map", "aggregate"])
def test_a_filter_a_map_and_an_aggregate_in_sql_write_the_yaml_twins_rows(
        spark: Any, tmp_path: Path, name: str, yaml_text: str, sql_text: str) -> None:
    sql = _rows(spark, _folder(tmp_path / "sql_specs", **{f"{name}.sql": sql_text}),
                tmp_path / "sql", name)
    view, want = FILTER_AND_SUM_ROWS[name]
    assert {view(r) for r in sql} == want
    assert sql == _rows(spark, _folder(tmp_path / "yaml_specs", **{f"{name}.yaml": yaml_text}),
                        tmp_path / "yaml", name)
