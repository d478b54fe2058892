"""Pipeline specs of the table operators (issue 10, item 6): the demo's YAML specs, errors that
name the setting, and the filter and aggregate engines on typed lake columns (a landing source
ingested as a changelog; an aggregate over another pipeline's output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from demo.demo_accounts import COUNT_SPEC, JOIN_SPEC
from joins import lake
from joins.changelog.keyed import latest_per_key
from joins.errors import ConfigError
from joins.pipeline import PipelineLayout, parse_pipeline_spec

SOURCE = {"name": "items", "format": "jsonl", "key_columns": [{"name": "id", "type": "string"}],
          "value_columns": [{"name": "team", "type": "string"}, {"name": "n", "type": "long"},
                            {"name": "score", "type": "double"}],
          "ts_column": "ts", "tombstone_column": "deleted"}


def test_demo_specs_parse() -> None:
    join, count = parse_pipeline_spec(JOIN_SPEC), parse_pipeline_spec(COUNT_SPEC)
    assert [i.kind for i in join.pipeline_inputs()] == ["changelog", "changelog"]
    assert join.engine_spec().left.history_retention_ms == 172_800_000
    [item] = count.pipeline_inputs()
    assert (item.kind, item.upstream, item.name, item.source) == \
        ("upstream", "customer_accounts", "customer_accounts", None)
    layout = PipelineLayout("/lake", count)
    assert layout.input_table("table") == "/lake/joins/customer_accounts/output"


@pytest.mark.parametrize(("changes", "fragment"), [
    ({"left": {**JOIN_SPEC["left"], "history_retention_ms": None}},
     "config.left.history_retention_ms: required when left.versioned is true"),
    ({"right": {**JOIN_SPEC["right"], "versioned": False}},
     "config.right.history_retention_ms: only meaningful for a versioned table"),
    ({"right": {**JOIN_SPEC["right"], "key_columns": [{"name": "customer_id", "type": "long"}]}},
     "config.right.key_columns: the right key is long but the left key is string"),
    ({"join": "full"}, "config.join"),
])
def test_table_join_spec_errors_name_the_setting(changes: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_pipeline_spec({**JOIN_SPEC, **changes})


@pytest.mark.parametrize(("raw", "fragment"), [
    ({**COUNT_SPEC, "source": SOURCE}, "config.source: give either source"),
    ({**COUNT_SPEC, "versioned": True, "history_retention_ms": 5}, "config.versioned: an upstream"),
    ({**COUNT_SPEC, "upstream": None, "source": SOURCE, "group_by": "colour"},
     "config.group_by: 'colour' is not a value column of 'items'"),
    ({"operator": "table_filter", "name": "big", "start_date": "2024-03-01", "source": SOURCE,
      "predicate": {"field": "a.b", "op": "eq", "value": 1}}, "config.predicate.field"),
    ({"operator": "table_map", "name": "m", "start_date": "2024-03-01", "source": SOURCE,
      "columns": ["colour"]}, "config.columns.0.field: 'colour' is not a value column of 'items'"),
    ({"operator": "table_map", "name": "m", "start_date": "2024-03-01", "source": SOURCE,
      "columns": [{"field": "n", "as": "ts"}]}, "config.columns.0.as: 'ts' is a column the operator"),
    ({"operator": "table_map", "name": "m", "start_date": "2024-03-01", "source": SOURCE,
      "columns": ["n", {"field": "team", "as": "old_n"}]}, "config.columns.1.as: 'old_n'"),
])
def test_filter_map_and_aggregate_spec_errors(raw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        parse_pipeline_spec(raw)


def test_a_sum_of_a_column_that_holds_no_numbers_is_refused(tmp_path: Path) -> None:
    # A source declares its types: refused when the spec loads. An upstream pipeline's output
    # declares none: refused when a run builds the step from its table's schema, before any row.
    import pyarrow as pa
    from deltalake import write_deltalake

    with pytest.raises(ConfigError, match=r"config\.aggregate\.field: sum needs a number column; "
                                          "'team' is declared string"):
        parse_pipeline_spec({**COUNT_SPEC, "upstream": None, "source": SOURCE, "group_by": "n",
                             "aggregate": {"function": "sum", "field": "team"}})
    spec = parse_pipeline_spec({**COUNT_SPEC, "aggregate": {"function": "sum", "field": "left_name"}})
    layout = PipelineLayout(str(tmp_path), spec)
    write_deltalake(layout.input_table("table"), pa.table({
        "customer_id": ["c1"], "left_country": ["DE"], "left_name": ["Ada"], "_batch_id": [0]}))
    with pytest.raises(ConfigError, match="sum needs a number column; 'left_name' of "
                                          "'customer_accounts' is string"):
        spec.step(layout)


# ---- engines on typed columns ----------------------------------------------------------------

ROWS = [
    {"id": "a", "team": "red", "n": 3, "score": 1.5, "deleted": False, "ts": 1},
    {"id": "b", "team": "red", "n": 5, "score": 0.25, "deleted": False, "ts": 2},
    {"id": "c", "team": "blue", "n": 1, "score": 2.0, "deleted": False, "ts": 3},
    {"id": "a", "team": "blue", "n": 4, "score": 1.0, "deleted": False, "ts": 4},
    {"id": "b", "team": None, "n": None, "score": None, "deleted": True, "ts": 5},
    {"id": "d", "team": None, "n": 9, "score": 9.0, "deleted": False, "ts": 6},   # no group
]


def land(layout: PipelineLayout, name: str, rows: list[dict[str, Any]]) -> None:
    folder = Path(layout.landing(layout.spec.pipeline_inputs()[0].source))  # type: ignore[arg-type]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def ingest(spark: Any, layout: PipelineLayout) -> None:
    from joins.ingest import run_ingest

    run_ingest(spark, layout.ingest_source(layout.spec.pipeline_inputs()[0]))


@pytest.mark.spark
def test_filter_map_and_aggregates_on_typed_columns(spark: Any, tmp_path: Path) -> None:
    base = {"start_date": "2024-03-01", "source": SOURCE}
    specs = {
        "filter": {**base, "operator": "table_filter", "name": "big",
                   "predicate": {"field": "n", "op": "ge", "value": 3}},
        "count": {**base, "operator": "table_aggregate", "name": "per_team", "group_by": "team",
                  "aggregate": "count"},
        "sum": {**base, "operator": "table_aggregate", "name": "score_per_team", "group_by": "team",
                "aggregate": {"function": "sum", "field": "score"}},
        "concat": {**base, "operator": "table_aggregate", "name": "ids_per_team",
                   "group_by": "team", "aggregate": {"function": "concat", "field": "n"}},
        "map": {**base, "operator": "table_map", "name": "teams",
                "columns": ["team", {"field": "n", "as": "items"}]},
    }
    results = {}
    for what, raw in specs.items():
        layout = PipelineLayout(str(tmp_path / what), parse_pipeline_spec(raw))
        engine = layout.spec.engine(layout)
        land(layout, "001.jsonl", ROWS[:3])
        ingest(spark, layout)
        first = engine.microbatch(spark)
        land(layout, "002.jsonl", ROWS[3:])
        ingest(spark, layout)
        second = engine.microbatch(spark)
        assert not first.skipped and not second.skipped and second.batch_id == 1
        out = lake.read_delta(spark, layout.output)
        results[what] = {r[0]: r for r in latest_per_key(out, out.columns[0]).collect()}
        if what == "count":
            assert second.counters["null_group_key_skipped"] == 1
    big = results["filter"]
    assert {k: (r["has_value"], r["n"]) for k, r in big.items()} == \
        {"a": (True, 4), "b": (False, None), "d": (True, 9)}
    teams = results["map"]
    assert {k: (r["has_value"], r["team"], r["items"]) for k, r in teams.items()} == \
        {"a": (True, "blue", 4), "b": (False, None, None), "c": (True, "blue", 1),
         "d": (True, None, 9)}
    assert (teams["a"]["old_team"], teams["a"]["old_items"]) == ("red", 3)
    assert "score" not in lake.table_schema(str(tmp_path / "map" / "joins" / "teams" / "output")).fieldNames()
    # Red lost its last member: it holds the aggregate of none, as Kafka's subtractor leaves it.
    assert {k: r["count"] for k, r in results["count"].items()} == {"red": 0, "blue": 2}
    assert not any(r["tombstone"] for what in results for r in results[what].values()
                   if what not in ("filter", "map"))
    assert {k: r["sum"] for k, r in results["sum"].items()} == {"red": 0.0, "blue": 3.0}
    assert {k: r["concat"] for k, r in results["concat"].items()} == {"red": "", "blue": "4,1"}
