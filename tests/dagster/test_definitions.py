"""The code location loads: `defs` validates, and holds every asset, check, job, sensor and schedule."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from pipelines.definitions import DEMO_SPEC, build_definitions


def test_defs_validate() -> None:
    from pipelines.definitions import defs

    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {"orders_ingest", "rates_ingest", "orders_with_rates_backfill", "orders_with_rates_checks",
            "orders_with_rates_microbatch"} <= set(repo.job_names)
    assert {s.name for s in repo.sensor_defs} == {
        "orders_landing_sensor", "rates_landing_sensor", "orders_with_rates_microbatch_sensor"}
    assert [s.name for s in repo.schedule_defs] == ["orders_with_rates_nightly_backfill"]
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {"orders", "rates", "orders_with_rates"}
    checks = {k.name for k in graph.asset_check_keys}
    assert checks == {"backfill_agrees_with_stream", "no_duplicate_output_rows", "quarantine_below_threshold"}


def test_workspace_loads_the_definitions_module() -> None:
    with open("workspace.yaml") as f:
        workspace = yaml.safe_load(f)
    assert workspace == {"load_from": [{"python_module": "pipelines.definitions"}]}


def test_lake_root_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from pipelines.definitions import lake_root_from_env

    monkeypatch.setenv("TJ_LAKE_ROOT", str(tmp_path))
    assert lake_root_from_env() == str(tmp_path)
    monkeypatch.delenv("TJ_LAKE_ROOT")
    assert lake_root_from_env() == "./var/lake"
    defs = build_definitions([DEMO_SPEC], lake_root=str(tmp_path))
    assert defs.resources["lake"].root_path() == str(tmp_path)


def test_two_specs_in_one_location() -> None:
    other = {**DEMO_SPEC, "name": "trades_with_rates",
             "stream": {**DEMO_SPEC["stream"], "name": "trades"},
             "table": {**DEMO_SPEC["table"], "name": "fx"}}
    defs = build_definitions([DEMO_SPEC, other], lake_root="/tmp/unused")
    dg.Definitions.validate_loadable(defs)
    assert "trades_with_rates_microbatch" in defs.get_repository_def().job_names
