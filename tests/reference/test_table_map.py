"""The reference table map (KTable#mapValues as a projection): its rules, its config errors,
and a property holding it to an independent oracle on random tables."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.core.fields import MISSING, read_path
from joins.errors import ConfigError
from joins.operators.table_filter.reference import TableFilterProcessor
from joins.operators.table_filter.spec import TableFilterSpec
from joins.operators.table_map.reference import TableMapProcessor
from joins.operators.table_map.spec import TableMapSpec, parse_table_map_record
from joins.spec import parse_spec

COLUMNS = [{"field": "n", "as": "x"}, "s", {"field": "o.p", "as": "p"}]


def make_spec(columns: list[Any] | None = None, versioned: bool = False,
              retention: int = 1000) -> TableMapSpec:
    config: dict[str, Any] = {"columns": COLUMNS if columns is None else columns, "versioned": versioned}
    if versioned:
        config["history_retention_ms"] = retention
    return parse_spec(TableMapSpec, config, operator="table_map")


def run(spec: TableMapSpec, rows: list[tuple[Any, Any, int]]) -> list[list[dict[str, Any]]]:
    processor = TableMapProcessor(spec)
    return [processor.process(parse_table_map_record({"i": i, "key": k, "value": v, "ts": t}, i))
            for i, (k, v, t) in enumerate(rows)]


def test_projection_renames_and_reads_a_missing_field_as_null() -> None:
    out = run(make_spec(), [("a", {"n": 1, "s": "q", "o": {"p": True}, "z": 9}, 1),
                            ("a", {"n": 2}, 2)])
    assert out[0][0]["value"] == {"x": 1, "s": "q", "p": True}
    assert out[1][0]["value"] == {"x": 2, "s": None, "p": None}
    assert out[1][0]["old_value"] == {"x": 1, "s": "q", "p": True}


def test_no_null_to_null_drop_unlike_the_filter() -> None:
    # KTableMapValues forwards what its source forwards: a tombstone of an absent key too.
    assert run(make_spec(), [("a", None, 1)]) == [[{"key": "a", "value": None, "old_value": None,
                                                    "ts": 1, "is_latest": True}]]


def test_versioned_out_of_order_and_expired() -> None:
    spec = make_spec(["n"], versioned=True, retention=5)
    processor = TableMapProcessor(spec)
    out = [processor.process(parse_table_map_record({"i": i, "key": k, "value": v, "ts": t}, i))
           for i, (k, v, t) in enumerate([("a", {"n": 1}, 10), ("a", {"n": 2}, 8), ("b", {"n": 3}, 4)])]
    assert out[1] == [{"key": "a", "value": {"n": 2}, "old_value": {"n": 1}, "ts": 8,
                       "is_latest": False}]
    assert out[2] == []
    assert processor.metrics == {"expired": 1, "out_of_order_forwarded": 1}


@pytest.mark.parametrize(("columns", "message"), [
    (["n", {"field": "m", "as": "n"}], "config.columns.1: two output columns are named 'n'"),
    ([{"field": "n", "as": "1x"}], "config.columns.0.as: '1x' is not a column name"),
    ([], "config.columns: Tuple should have at least 1 item"),
    ([{"field": "n", "alias": "x"}], "config.columns.0.alias"),
])
def test_config_errors_name_the_setting(columns: list[Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        make_spec(columns)


# ---- property: an independent oracle ------------------------------------------------------------

VALUES = [{"n": 1, "s": "p"}, {"n": 2.5}, {"s": "", "o": {"p": 1}}, {"o": 3}, {}, None]


def project(value: Any) -> Any:
    if value is None:
        return None
    parts = {"x": read_path(value, "n"), "s": read_path(value, "s"), "p": read_path(value, "o.p")}
    return {k: None if v is MISSING else v for k, v in parts.items()}


@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", 1]), st.sampled_from(VALUES),
                               st.integers(0, 12)), min_size=1, max_size=12),
       versioned=st.booleans())
def test_map_is_the_projection_of_what_the_table_source_forwards(
        rows: list[tuple[Any, Any, int]], versioned: bool) -> None:
    # The oracle: a filter that passes every value forwards exactly what the table source does
    # (a versioned filter drops nothing; an unversioned one only null-to-null changes, which
    # mapValues forwards as (null, null)); the map is that change with both sides projected.
    config: dict[str, Any] = {"predicate": {"op": "ne", "value": "no value is this"},
                              "versioned": versioned}
    if versioned:
        config["history_retention_ms"] = 4
    source = TableFilterProcessor(parse_spec(TableFilterSpec, config, operator="table_filter"))
    got = run(make_spec(versioned=versioned, retention=4), rows)
    for n, (k, v, t) in enumerate(rows):
        dropped = source.metrics["null_to_null_dropped"]
        forwarded = source.process(parse_table_map_record({"i": n, "key": k, "value": v, "ts": t}, n))
        if source.metrics["null_to_null_dropped"] > dropped:
            forwarded = [{"key": k, "value": None, "old_value": None, "ts": t, "is_latest": True}]
        want = [{**item, "value": project(item["value"]), "old_value": project(item["old_value"])}
                for item in forwarded]
        assert got[n] == want
