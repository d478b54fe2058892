"""The code location loads: `defs` validates, and holds every asset, check, job, sensor and schedule."""

from __future__ import annotations

import re

import dagster as dg
import pytest
import yaml

from pipelines.definitions import DEMO_SPEC, build_definitions


def test_defs_validate() -> None:
    from pipelines.definitions import defs

    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {"orders_ingest", "rates_ingest", "orders_with_rates_backfill", "orders_with_rates_checks",
            "orders_with_rates_microbatch", "customers_ingest", "accounts_ingest",
            "customer_accounts_backfill", "customer_accounts_checks", "customer_accounts_microbatch",
            "accounts_per_country_checks", "accounts_per_country_microbatch",
            "deliveries_ingest", "orders_with_deliveries_microbatch",
            "order_updates_ingest", "orders_with_customer_backfill",
            "orders_with_customer_checks", "orders_with_customer_microbatch"} <= set(repo.job_names)
    # The count has no batch form: no backfill job, no nightly schedule, no agreement check.
    assert "accounts_per_country_backfill" not in repo.job_names
    assert {s.name for s in repo.sensor_defs} == {
        "orders_landing_sensor", "rates_landing_sensor", "orders_with_rates_microbatch_sensor",
        "orders_with_rates_staleness_sensor",
        "customers_landing_sensor", "accounts_landing_sensor", "customer_accounts_microbatch_sensor",
        "customer_accounts_staleness_sensor", "accounts_per_country_microbatch_sensor",
        "deliveries_landing_sensor",
        "orders_with_deliveries_microbatch_sensor", "orders_with_deliveries_staleness_sensor",
        "order_updates_landing_sensor",
        "orders_with_customer_microbatch_sensor", "orders_with_customer_staleness_sensor"}
    assert sorted(s.name for s in repo.schedule_defs) == [
        "customer_accounts_nightly_backfill", "orders_with_customer_nightly_backfill",
        "orders_with_deliveries_nightly_backfill", "orders_with_rates_nightly_backfill"]
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    joins = {"orders_with_rates", "customer_accounts", "accounts_per_country", "orders_with_deliveries",
             "orders_with_customer"}
    sources = {"orders", "rates", "customers", "accounts", "deliveries", "order_updates"}
    assert keys == {*joins, *sources, *(f"{s}_landing" for s in sources),
                    *(f"{j}_quarantine" for j in joins), "orders_with_rates_grace_buffer"}
    # The landing folders feed the tables; quarantine and buffer are observed, not materialized.
    assert graph.get(dg.AssetKey("orders")).parent_keys == {dg.AssetKey("orders_landing")}
    # One source feeds many joins: the lineage shows `orders` and `customers` once, with two
    # joins each downstream, in the `sources` group.
    assert graph.get(dg.AssetKey("orders")).child_keys >= {
        dg.AssetKey("orders_with_rates"), dg.AssetKey("orders_with_deliveries")}
    assert graph.get(dg.AssetKey("customers")).child_keys >= {
        dg.AssetKey("customer_accounts"), dg.AssetKey("orders_with_customer")}
    assert graph.get(dg.AssetKey("orders")).group_name == "sources"
    assert graph.get(dg.AssetKey("rates")).group_name == "orders_with_rates"
    quarantine = graph.get(dg.AssetKey("orders_with_rates_quarantine"))
    assert quarantine.is_observable
    # Observed only when rows are quarantined: the catalog's "Never observed" must not read as
    # broken, so the description says what it means.
    assert "never observed means nothing was quarantined" in (quarantine.description or "")
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    standard = {"backfill_agrees_with_stream", "no_duplicate_output_rows", "quarantine_below_threshold"}
    assert {name for asset, name in checks if asset == "orders_with_rates"} == standard
    assert {name for asset, name in checks if asset == "orders_with_deliveries"} == standard
    for table_join in ("customer_accounts", "orders_with_customer"):
        assert {name for asset, name in checks if asset == table_join} == standard | {
            "latest_equals_temporal_history"}
    assert {name for asset, name in checks if asset == "accounts_per_country"} == {
        "no_duplicate_output_rows", "quarantine_below_threshold"}
    # The count reads the join's output: the join asset is its upstream in the lineage.
    assert graph.get(dg.AssetKey("accounts_per_country")).parent_keys == {dg.AssetKey("customer_accounts")}
    # Nothing but its micro-batches can write the count: the UI offers no Materialize for it,
    # and "Materialize all" leaves it out; the joins with a batch form can be materialized.
    assert not graph.get(dg.AssetKey("accounts_per_country")).is_executable
    assert all(graph.get(dg.AssetKey(j)).is_materializable for j in joins - {"accounts_per_country"})


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


def test_spark_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from joins.errors import ConfigError
    from pipelines.definitions import spark_resource_from_env

    monkeypatch.setenv("TJ_SPARK_MASTER", "spark://somewhere:7077")
    monkeypatch.setenv("TJ_SPARK_CONF", '{"spark.sql.catalogImplementation": "hive", '
                                        '"spark.executor.cores": 2, "spark.eventLog.enabled": true}')
    resource = spark_resource_from_env()
    assert resource.master == "spark://somewhere:7077"
    assert resource.settings().conf()["spark.sql.catalogImplementation"] == "hive"
    assert resource.extra_conf == {"spark.sql.catalogImplementation": "hive",
                                   "spark.executor.cores": "2", "spark.eventLog.enabled": "true"}
    for bad, message in [("catalogImplementation=hive", r"TJ_SPARK_CONF: not JSON .*e\.g\. \{"),
                         ('["spark.a"]', "TJ_SPARK_CONF: give a JSON object of Spark settings"),
                         ('{"sql.x": "1"}', r"start with 'spark\.', got \['sql\.x'\]"),
                         ('{"spark.a": {"b": 1}}', r"\['spark\.a'\] are not")]:
        monkeypatch.setenv("TJ_SPARK_CONF", bad)
        with pytest.raises(ConfigError, match=message):
            spark_resource_from_env()


def test_two_specs_in_one_location() -> None:
    other = {**DEMO_SPEC, "name": "trades_with_rates",
             "stream": {**DEMO_SPEC["stream"], "name": "trades"},
             "table": {**DEMO_SPEC["table"], "name": "fx"}}
    defs = build_definitions([DEMO_SPEC, other], lake_root="/tmp/unused")
    dg.Definitions.validate_loadable(defs)
    assert "trades_with_rates_microbatch" in defs.get_repository_def().job_names


def _write_spec(folder, file_name: str, **changes) -> None:
    spec = {**DEMO_SPEC, **changes}
    (folder / file_name).write_text(yaml.safe_dump(spec, sort_keys=False, default_flow_style=False))


def test_definitions_from_a_folder_of_yaml_specs(tmp_path) -> None:
    """A folder of spec files: each becomes its own pipeline; a bad file is reported by path and
    setting (log and the `spec_errors` sensor) and the others still load."""
    specs = tmp_path / "specs"
    specs.mkdir()
    _write_spec(specs, "a_orders.yaml")
    _write_spec(specs, "b_trades.yaml", name="trades_with_rates",
                stream={**DEMO_SPEC["stream"], "name": "trades"},
                table={**DEMO_SPEC["table"], "name": "fx"})
    _write_spec(specs, "c_bad.yaml", name="broken", grace_ms="half an hour",
                stream={**DEMO_SPEC["stream"], "name": "s2"}, table={**DEMO_SPEC["table"], "name": "t2"})
    (specs / "d_syntax.yml").write_text("operator: stream_table_join\nname: [unclosed\n")
    (specs / "notes.txt").write_text("not a spec")
    defs = build_definitions(lake_root="/tmp/unused", spec_dir=specs)
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {"orders_with_rates_microbatch", "trades_with_rates_microbatch"} <= set(repo.job_names)
    assert not any(name.startswith("broken") for name in repo.job_names)
    sensor = defs.resolve_sensor_def("spec_errors")
    description = sensor.description or ""
    assert re.search(r"c_bad\.yaml: stream_table_join spec 'broken': invalid config: "
                     r"line \d+, config\.grace_ms", description)
    assert "d_syntax.yml: line 3, column 1: not valid YAML" in description
    with dg.build_sensor_context() as context:
        tick = sensor.evaluate_tick(context)
    assert "2 spec file(s) did not load" in (tick.skip_message or "")
    # Where a user looks: each broken file is an asset of the spec_errors group, named as the
    # pipeline it meant to define, whose description says file and line, and whose check the
    # sensor (on by default) records as failed on every tick: red in the catalog.
    graph = defs.resolve_asset_graph()
    broken = graph.get(dg.AssetKey("broken"))
    assert broken.group_name == "spec_errors"
    assert re.search(r"c_bad\.yaml` did not load\*\* \(line \d+\)", broken.description or "")
    assert graph.get(dg.AssetKey("spec_error_d_syntax")).group_name == "spec_errors"
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert {(e.asset_key.to_user_string(), e.check_name, e.passed) for e in tick.asset_events} == {
        ("broken", "spec_loads", False), ("spec_error_d_syntax", "spec_loads", False)}
    # Running the check reads the file again: it passes once the file is fixed.
    job = dg.Definitions.merge(defs, dg.Definitions(jobs=[dg.define_asset_job(
        "check_specs", selection=dg.AssetSelection.checks_for_assets(dg.AssetKey("broken")))]))
    run = job.resolve_job_def("check_specs").execute_in_process(raise_on_error=False)
    assert [e.passed for e in run.get_asset_check_evaluations()] == [False]
    _write_spec(specs, "c_bad.yaml", name="broken", stream={**DEMO_SPEC["stream"], "name": "s2"},
                table={**DEMO_SPEC["table"], "name": "t2"})
    run = job.resolve_job_def("check_specs").execute_in_process(raise_on_error=False)
    assert [e.passed for e in run.get_asset_check_evaluations()] == [True]


def test_check_names_file_line_and_the_near_miss_key(tmp_path, capsys) -> None:
    """`./tj check` (python -m joins check): every file as the code location loads it."""
    from joins.cli import EXIT_INVALID, EXIT_OK, main

    specs = tmp_path / "specs"
    specs.mkdir()
    _write_spec(specs, "a_orders.yaml")
    assert main(["check", str(specs)]) == EXIT_OK
    assert "ok     " in capsys.readouterr().out
    text = (specs / "a_orders.yaml").read_text().replace("grace_ms:", "grace:")
    (specs / "a_orders.yaml").write_text(text)
    line = 1 + text.split("\n").index(next(t for t in text.split("\n") if t.startswith("grace:")))
    assert main(["check", str(specs)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert (f"a_orders.yaml: stream_table_join spec 'orders_with_rates': invalid config: "
            f"line {line}, config.grace: unknown key (not a setting of this pipeline) "
            f"(did you mean `grace_ms`?)") in err
    assert "1 spec file(s): 0 ok, 1 with errors" in err


def test_check_takes_its_folder_as_table_and_reproduce_do(tmp_path, capsys, monkeypatch) -> None:
    from joins.cli import EXIT_INVALID, EXIT_OK, main

    specs = tmp_path / "specs"
    specs.mkdir()
    _write_spec(specs, "a_orders.yaml")
    assert main(["check", "--specs", str(specs)]) == EXIT_OK
    monkeypatch.setenv("TJ_SPECS_DIR", str(specs))
    assert main(["check"]) == EXIT_OK
    capsys.readouterr()
    for argv, said in ((["--specs", str(tmp_path / "gone")], "gone does not exist"),
                       ([str(specs / "a_orders.yaml")], "a_orders.yaml is not a folder"),
                       ([str(specs), "--specs", str(tmp_path)], "two specs folders given")):
        assert main(["check", *argv]) == EXIT_INVALID
        assert said in capsys.readouterr().err


def test_a_duration_beyond_a_long_is_refused(tmp_path, capsys) -> None:
    # Spark computes with durations in 64-bit longs; Python's integers have no such end.
    from joins.cli import EXIT_INVALID, main

    specs = tmp_path / "specs"
    specs.mkdir()
    _write_spec(specs, "a_orders.yaml", grace_ms=2**63, history_retention_ms=2**64)
    assert main(["check", str(specs)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert f"config.grace_ms: Input should be less than or equal to {2**63 - 1} (got {2**63})" in err


def test_durations_spelled_as_the_ui_shows_them(tmp_path, capsys) -> None:
    # `grace_ms: 30 min` reads as 1800000 ms; a spelling with no one meaning is refused at its line.
    from joins.cli import EXIT_INVALID, EXIT_OK, main
    from joins.pipeline import parse_pipeline_spec

    spec = parse_pipeline_spec({**DEMO_SPEC, "grace_ms": "30 min", "history_retention_ms": "1 day"})
    assert (spec.grace_ms, spec.history_retention_ms) == (1_800_000, 86_400_000)
    specs = tmp_path / "specs"
    specs.mkdir()
    _write_spec(specs, "a_orders.yaml", grace_ms="30 min", history_retention_ms="2 days 6 h")
    assert main(["check", str(specs)]) == EXIT_OK
    _write_spec(specs, "a_orders.yaml", grace_ms="30m")
    assert main(["check", str(specs)]) == EXIT_INVALID
    assert re.search(r"line \d+, config\.grace_ms: `m` could mean minutes or months: write `min` "
                     r"for minutes \(got '30m'\)", capsys.readouterr().err)


def test_check_suggests_the_choice_a_misspelt_value_meant(tmp_path, capsys) -> None:
    from joins.cli import EXIT_INVALID, main

    specs = tmp_path / "specs"
    specs.mkdir()
    _write_spec(specs, "a_orders.yaml", join="lfet", late="sideways")
    assert main(["check", str(specs)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "config.join: Input should be 'inner' or 'left' (got 'lfet') (did you mean `left`?)" in err
    # Nothing near: the choices alone.
    assert "config.late: Input should be 'join', 'drop' or 'quarantine' (got 'sideways')" in err
    assert "(got 'sideways') (did you mean" not in err


def test_a_spec_file_repeating_a_name_is_refused(tmp_path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    _write_spec(specs, "copy.yaml")
    defs = build_definitions([DEMO_SPEC], lake_root="/tmp/unused", spec_dir=specs)
    assert "already defined by another spec" in (defs.resolve_sensor_def("spec_errors").description or "")
