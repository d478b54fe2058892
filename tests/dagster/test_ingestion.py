"""Ingest runs take each landing file exactly once, also across a crash between the plan
(the batch log's) and the data commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.errors import ConfigError
from joins.ingest import SEQ, run_ingest
from joins.ingest.log import IngestLog, PlannedBatch, PlannedFile, pending_files
from joins.ingest.stream import ingest_stream_batch
from joins.lake import read_delta, txn_version
from joins.pipeline import PipelineLayout, parse_pipeline_spec
from pipelines.definitions import DEMO_SPEC

names = st.lists(st.from_regex(r"[0-9]{4}-[a-z]{1,3}\.csv", fullmatch=True), unique=True, max_size=8)


@given(names, names, names)
def test_pending_files_are_landed_untaken_and_requested(landed: list[str], planned: list[str],
                                                        requested: list[str]) -> None:
    got = pending_files(sorted(landed), set(planned), requested)
    wanted = set(requested) if requested else set(landed)
    assert got == sorted((set(landed) & wanted) - set(planned))


def _rates(folder: Path, name: str, rows: list[tuple[str, float, int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("currency,rate,ts\n" + "".join(f"{c},{r},{t}\n" for c, r, t in rows))


@pytest.mark.spark
def test_each_file_is_ingested_once_and_a_planned_batch_is_resumed(spark, tmp_path: Path) -> None:
    spec = parse_pipeline_spec(DEMO_SPEC)
    layout = PipelineLayout(str(tmp_path), spec)
    table = spec.input("table")
    landing = Path(layout.landing(table.source))
    _rates(landing, "0000-rates.csv", [("EUR", 1.08, 1000), ("GBP", 1.27, 2000)])

    rates = layout.ingest_source(table)
    [first] = run_ingest(spark, rates)
    assert (first.batch_id, first.files, first.stored, first.skipped) == (0, ("0000-rates.csv",), 2, False)
    assert run_ingest(spark, rates) == []

    # A crash after the plan of batch 1 in the source's batch log, before its data commit.
    _rates(landing, "0001-rates.csv", [("EUR", 1.09, 3000)])
    _rates(landing, "0002-rates.csv", [("EUR", 1.10, 4000)])
    IngestLog(layout.manifest(table.source), source_id="rates").plan(
        PlannedBatch(1, (PlannedFile("0001-rates.csv"),)))
    resumed = run_ingest(spark, rates)
    assert [(s.batch_id, s.files) for s in resumed] == [(1, ("0001-rates.csv",)), (2, ("0002-rates.csv",))]
    versions = read_delta(spark, layout.table(table.source))
    assert versions.count() == 4
    assert txn_version(layout.table(table.source), "rates") == 2

    with pytest.raises(ConfigError, match=r"config\.files names file\(s\) not in the landing folder"):
        run_ingest(spark, rates, requested=["9999-rates.csv"])


@pytest.mark.spark
def test_stream_ingest_quarantines_bad_rows_and_is_idempotent(spark, tmp_path: Path) -> None:
    spec = parse_pipeline_spec(DEMO_SPEC)
    layout = PipelineLayout(str(tmp_path), spec)
    stream = spec.input("stream")
    landing = Path(layout.landing(stream.source))
    landing.mkdir(parents=True)
    (landing / "0000-orders.jsonl").write_text(
        '{"order_id": "o-1", "currency": "EUR", "amount": 10.0, "ts": 1000}\n'
        '{"order_id": null, "currency": "EUR", "amount": 11.0, "ts": 2000}\n'  # not nullable
        'not json\n'
        '{"order_id": "o-2", "currency": "GBP", "amount": 12.5, "ts": 86400000}\n')
    orders = layout.ingest_source(stream)
    [s] = run_ingest(spark, orders)
    assert (s.rows_in, s.stored, s.quarantined, s.stream_time) == (4, 2, 2, 86_400_000)
    events = read_delta(spark, layout.table(stream.source))
    assert sorted(events.columns) == sorted(["currency", "order_id", "amount", "ts", "event_date",
                                             SEQ, "source_id", "batch_id", "source_file",
                                             "source_row"])
    days = [str(r["event_date"]) for r in events.orderBy(SEQ).collect()]
    assert days == ["1970-01-01", "1970-01-02"]
    quarantine = read_delta(spark, layout.quarantine(stream.source))
    reasons = {r["field"]: r["reason"] for r in quarantine.collect()}
    assert set(reasons) == {"order_id", "<record>"}
    assert "row 2" in reasons["order_id"] and "not null" in reasons["order_id"]

    # The same batch again (a retry after its commits landed) writes nothing and reports the same.
    again = ingest_stream_batch(spark, orders, [str(landing / "0000-orders.jsonl")], batch_id=0)
    assert again.skipped and (again.stored, again.quarantined) == (2, 2)
    assert read_delta(spark, layout.table(stream.source)).count() == 2


def test_reading_rules_of_a_source_reach_the_ingest(spec_dict: dict) -> None:
    spec_dict["table"].update(max_record_bytes=4096, ts_min_ms=0, csv_delimiter=";")
    layout = PipelineLayout("/lake", parse_pipeline_spec(spec_dict))
    landing = layout.ingest_source(layout.spec.input("table")).spec
    assert (landing.max_record_bytes, landing.ts_min_ms, landing.csv_delimiter) == (4096, 0, ";")
    spec_dict["table"].update(csv_header=False)
    with pytest.raises(ConfigError, match=r"config\.table\.csv_columns: required when csv_header "
                                          r"is false"):
        parse_pipeline_spec(spec_dict)
