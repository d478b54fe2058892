"""Versioned queries (issue 29, point 2) against a hand-computed table: `get` inside and outside
history retention, at a past commit, for a key never held, after a delete; `history` with its
validity intervals and what is beyond retention; the command line's answers and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from joins.core.human import iso_time
from joins.query import QueryError, VersionedTableRef, get, history, parse_time
from joins.versioned.ingest import ingest_changelog
from joins.versioned.spark_store import VersionedDeltaLayout

pytestmark = pytest.mark.spark

H = 3_600_000
T0 = parse_time("2024-03-01T00:00:00Z")
LAYOUT = VersionedDeltaLayout(key_columns=("currency",), value_columns=("rate",),
                              history_retention_ms=24 * H)
SCHEMA = "currency string, rate double, ts long, tombstone boolean, arrival long"

# Commit 0: EUR 1.0 @0h, 1.1 @10h; USD 2.0 @5h.   Commit 1: EUR 1.2 @30h, USD deleted @40h.
# After commit 1 stream time is 40h and history retention 24h reaches back to 16h.
BATCHES = [
    [("EUR", 1.0, 0, False, 0), ("EUR", 1.1, 10 * H, False, 1), ("USD", 2.0, 5 * H, False, 2)],
    [("EUR", 1.2, 30 * H, False, 0), ("USD", None, 40 * H, True, 1)],
]

# A pipeline whose table is the versioned table above: how the command and the job find it.
SPEC = {"operator": "stream_table_join", "name": "orders_with_rates", "start_date": "2024-03-01",
        "stream": {"name": "orders", "format": "jsonl", "ts_column": "ts",
                   "key_columns": [{"name": "currency", "type": "string"}],
                   "value_columns": [{"name": "amount", "type": "double"}]},
        "table": {"name": "rates", "format": "csv", "ts_column": "ts",
                  "key_columns": [{"name": "currency", "type": "string"}],
                  "value_columns": [{"name": "rate", "type": "double"}]},
        "history_retention_ms": 24 * H}


@pytest.fixture(scope="module")
def table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> VersionedTableRef:
    root = tmp_path_factory.mktemp("query")
    # Where a lake keeps a source's table (joins.pipeline.SourceLayout), so the command finds it.
    path, quarantine = str(root / "tables" / "rates"), str(root / "quarantine" / "rates")
    for batch_id, rows in enumerate(BATCHES):
        frame = spark.createDataFrame([(k, v, T0 + ts, t, a) for k, v, ts, t, a in rows], SCHEMA)
        ingest_changelog(spark, frame, LAYOUT, versions_path=path, quarantine_path=quarantine,
                         source_id="rates", batch_id=batch_id)
    return VersionedTableRef("rates", path, LAYOUT)


def test_get_inside_retention(spark: Any, table: VersionedTableRef) -> None:
    answer = get(spark, table, {"currency": "EUR"}, T0 + 31 * H)
    assert (answer.value, answer.valid_from, answer.valid_to) == ({"rate": 1.2}, T0 + 30 * H, None)
    assert answer.text() == ("rates EUR as of 2024-03-02T07:00:00Z: rate=1.2 (valid from "
                             "2024-03-02T06:00:00Z, still valid)")


def test_get_beyond_retention_reads_only_the_latest_version(spark: Any, table: VersionedTableRef) -> None:
    answer = get(spark, table, {"currency": "EUR"}, T0 + 12 * H)   # 1.1 held then; 12h < 16h
    assert answer.value is None
    assert answer.reason == ("2024-03-01T12:00:00Z is beyond history retention: the table keeps "
                             "history back to 2024-03-01T16:00:00Z (stream time "
                             "2024-03-02T16:00:00Z minus 1 day); older times read only a key's "
                             "latest version")


def test_get_at_a_past_commit(spark: Any, table: VersionedTableRef) -> None:
    # At commit 0 stream time was 10h: 12h was within retention, and 1.1 the latest.
    answer = get(spark, table, {"currency": "EUR"}, T0 + 12 * H, commit=0)
    assert (answer.value, answer.valid_from, answer.valid_to) == ({"rate": 1.1}, T0 + 10 * H, None)
    assert get(spark, table, {"currency": "USD"}, T0 + 41 * H, commit=0).value == {"rate": 2.0}
    with pytest.raises(QueryError, match=r"has commits 0\.\.\d+; there is no commit 7"):
        get(spark, table, {"currency": "EUR"}, T0, commit=7)


def test_no_value_says_why(spark: Any, table: VersionedTableRef) -> None:
    assert get(spark, table, {"currency": "GBP"}, T0).reason == (
        "the table never held key GBP (no version was ever stored for it)")
    assert get(spark, table, {"currency": "USD"}, T0 + 41 * H).reason == (
        "deleted at 2024-03-02T16:00:00Z (a tombstone)")
    assert get(spark, table, {"currency": "EUR"}, T0 - H, commit=0).reason == (
        "its first version is valid from 2024-03-01T00:00:00Z")


def test_history_with_validity_and_retention(spark: Any, table: VersionedTableRef) -> None:
    got = [(v.value, v.valid_from - T0, None if v.valid_to is None else v.valid_to - T0,
            v.beyond_retention) for v in history(spark, table, {"currency": "EUR"})]
    assert got == [({"rate": 1.0}, 0, 10 * H, True), ({"rate": 1.1}, 10 * H, 30 * H, False),
                   ({"rate": 1.2}, 30 * H, None, False)]
    window = history(spark, table, {"currency": "EUR"}, start=T0 + 11 * H, end=T0 + 20 * H)
    assert [v.valid_from - T0 for v in window] == [10 * H]
    usd = history(spark, table, {"currency": "USD"})
    assert [(v.value, v.valid_to) for v in usd] == [({"rate": 2.0}, T0 + 40 * H), (None, None)]
    assert history(spark, table, {"currency": "GBP"}) == []


def test_times_in_iso_and_milliseconds() -> None:
    assert parse_time("2024-03-02T14:05:00Z") == parse_time("2024-03-02 14:05") == 1709388300000
    assert parse_time("2024-03-02") == parse_time("1709337600000") == 1709337600000
    assert parse_time("2024-03-02T15:05:00+01:00") == 1709388300000
    assert iso_time(parse_time("2024-03-02T14:05:00.250Z")) == "2024-03-02T14:05:00.250Z"
    with pytest.raises(QueryError, match="not a time: 'soon'"):
        parse_time("soon")


def test_the_command_line(spark: Any, table: VersionedTableRef, tmp_path: Path, capsys: Any) -> None:
    """`python -m joins table`: the table found by name in a specs folder, answers in ISO times
    (text or JSON), and the errors a user meets, each a line and exit status 2."""
    from joins.cli import EXIT_INVALID, EXIT_OK, main

    specs = tmp_path / "specs"
    specs.mkdir()
    lake = Path(table.path).parent.parent
    (specs / "join.yaml").write_text(yaml.safe_dump(SPEC))
    where = ["--lake", str(lake), "--specs", str(specs)]
    assert main(["table", "rates", "get", "EUR", "--as-of", "2024-03-02T07:00Z", *where]) == EXIT_OK
    assert capsys.readouterr().out.strip() == ("rates EUR as of 2024-03-02T07:00:00Z: rate=1.2 "
                                               "(valid from 2024-03-02T06:00:00Z, still valid)")
    assert main(["table", "rates", "history", "EUR", "--json", "--as-of-commit", "0", *where]) == EXIT_OK
    assert [v["valid_from"] for v in json.loads(capsys.readouterr().out)] == [
        "2024-03-01T00:00:00Z", "2024-03-01T10:00:00Z"]
    for argv, message in [
        (["table", "rtes", "get", "EUR", "--as-of", "2024-03-02"], "no table 'rtes' in the pipelines"),
        (["table", "orders", "get", "EUR", "--as-of", "2024-03-02"], "'orders' is an events table"),
        (["table", "rates", "get", "EUR", "--as-of", "2024-03-02", "--as-of-commit", "5"],
         "there is no commit 5"),
        (["table", "rates", "get", "EUR"], "get needs --as-of TIME")]:
        assert main([*argv, *where]) == EXIT_INVALID
        assert message in capsys.readouterr().err


def test_the_command_line_refuses_a_bad_time_before_starting_spark(
        tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A session costs seconds to start: a typo in a time is told at once.
    import joins.spark
    from joins.cli import EXIT_INVALID, main

    def no_session(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a session was started")

    monkeypatch.setattr(joins.spark, "get_spark", no_session)
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "join.yaml").write_text(yaml.safe_dump(SPEC))
    where = ["--lake", str(tmp_path / "lake"), "--specs", str(specs)]
    for argv in (["get", "EUR", "--as-of", "yesterday"], ["history", "EUR", "--to", "yesterday"]):
        assert main(["table", "rates", *argv, *where]) == EXIT_INVALID
        assert "not a time: 'yesterday'" in capsys.readouterr().err
    # Questions no answer fits, told before a session starts too (they were answered "no
    # version", or the argument was ignored).
    for argv, said in (
            (["history", "EUR", "--from", "2024-03-02", "--to", "2024-03-01"],
             "--from (2024-03-02T00:00:00Z) is after --to (2024-03-01T00:00:00Z)"),
            (["get", "EUR", "--as-of", "2024-03-01", "--to", "2024-03-02"],
             "--from and --to go with history"),
            (["history", "EUR", "--as-of", "2024-03-01"], "--as-of goes with get"),
            (["get", "EUR", "--as-of", "2024-03-01", "--as-of-commit", "-1"],
             "--as-of-commit: Delta versions count from 0, got -1")):
        assert main(["table", "rates", *argv, *where]) == EXIT_INVALID
        assert said in capsys.readouterr().err


def test_the_dagster_query_job(spark: Any, table: VersionedTableRef) -> None:
    """In the UI: the `rates_query` job's Launchpad takes a key and a time; the run's output
    metadata holds the answer, and a question it cannot answer fails the run with the reason."""
    from pipelines.definitions import build_definitions

    lake = str(Path(table.path).parent.parent)
    defs = build_definitions([SPEC], lake_root=lake)
    job = defs.resolve_job_def("rates_query")
    assert "orders_query" not in defs.get_repository_def().job_names   # an events table: no versions

    def ask(**config: Any) -> Any:
        return job.execute_in_process(
            run_config={"ops": {"rates_get_as_of": {"config": config}}},
            resources=defs.resources, raise_on_error=False)

    result = ask(key="EUR", as_of="2024-03-01T12:00Z", as_of_commit=0)
    [event] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    answer = event.event_specific_data.metadata["answer"].value
    assert answer == ("rates EUR as of 2024-03-01T12:00:00Z (commit 0): rate=1.1 (valid from "
                      "2024-03-01T10:00:00Z, still valid)")
    failed = ask(key="EUR", as_of="whenever")
    assert not failed.success
    [failure] = [e for e in failed.all_events if e.is_step_failure]
    assert "not a time: 'whenever'" in failure.step_failure_data.user_failure_data.description
