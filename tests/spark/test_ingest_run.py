"""Ingest runs of a source (issue 9): no bad file blocks the source, a half-committed batch is
completed without stale or doubled rows, one ingest per source at a time, a crashed run's
leftovers removed by the next run, the history retention stored with the versioned table."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from joins.errors import ConfigError
from joins.ingest import IngestSource, ingest_in_progress, run_ingest
from joins.ingest import run as ingest_run
from joins.ingest.log import IngestLog, IngestState
from joins.lake import (
    ConcurrentCommitError,
    Lease,
    WriterBusyError,
    delta_version,
    read_delta,
    table_properties,
    write_delta,
)
from joins.landing import LandingSpec
from joins.versioned import ingest as spark_incremental
from joins.versioned.batches import IngestStateError
from joins.versioned.quarantine import read_committed_quarantine
from joins.versioned.retention import RETENTION_PROPERTY, read_history_retention

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])


def landing_spec(fmt: str) -> LandingSpec:
    return LandingSpec.parse({"format": fmt, "key_columns": [{"name": "k", "type": "string"}],
                              "value_columns": [{"name": "v", "type": "long"}], "ts_column": "ts",
                              "on_bad_record": "quarantine"})


def source(root: Path, fmt: str = "jsonl", kind: str = "table", retention: int = 10_000) -> IngestSource:
    return IngestSource(name="s", kind=kind, landing=str(root / "landing"), spec=landing_spec(fmt),  # type: ignore[arg-type]
                        table=str(root / "table"), quarantine=str(root / "quarantine"),
                        manifest=str(root / "manifest"), lease=str(root / "lease"),
                        history_retention_ms=retention if kind == "table" else None)


def land_jsonl(folder: Path, name: str, *rows: tuple[str, int, int] | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join((r if isinstance(r, str) else f'{{"k": "{r[0]}", "ts": {r[1]}, "v": {r[2]}}}') + "\n"
                   for r in rows)
    (folder / name).write_text(text)
    return folder / name


def land_parquet(folder: Path, name: str, *rows: tuple[str, int, int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([{"k": k, "ts": t, "v": v} for k, t, v in rows],
                                        schema=SCHEMA), folder / name)


def stored(spark: Any, src: IngestSource) -> list[tuple[str, int, int]]:
    return sorted((r["k"], r["ts"], r["v"]) for r in read_delta(spark, src.table).collect())


def quarantined(spark: Any, src: IngestSource) -> list[tuple[str, int | None, str, str]]:
    return sorted((r["source_file"].rsplit("/", 1)[-1], r["source_row"], r["field"], r["kind"])
                  for r in read_delta(spark, src.quarantine).collect())


def crash_run(spark: Any, src: IngestSource, monkeypatch: pytest.MonkeyPatch, module: Any,
              step: str) -> None:
    """An ingest run killed when it reaches `module.step`."""
    def crash(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError(f"killed at {step}")

    with monkeypatch.context() as patch:
        patch.setattr(module, step, crash)
        with pytest.raises(RuntimeError, match="killed"):
            run_ingest(spark, src)


def test_corrupt_parquet_glob_name_and_out_of_range_ts_land_with_good_files(spark: Any,
                                                                            tmp_path: Path) -> None:
    src = source(tmp_path, "parquet")
    folder = Path(src.landing)
    land_parquet(folder, "1-good.parquet", ("a", 1_000, 1), ("b", 1_100, 2))
    land_parquet(folder, "2-glob[x]*.parquet", ("c", 1_200, 3))
    land_parquet(folder, "2-globby.parquet", ("d", 1_300, 4))   # what `2-glob[x]*` would match
    land_parquet(folder, "3-range.parquet", ("e", 1_400, 5), ("f", 253_402_300_800_000, 6),
                 ("g", 9_300_000_000_000_000, 7))
    good = (folder / "1-good.parquet").read_bytes()
    (folder / "4-corrupt.parquet").write_bytes(good[: len(good) // 2])
    (folder / "5-empty.parquet").write_bytes(b"")

    [first] = run_ingest(spark, src)
    assert stored(spark, src) == [("a", 1_000, 1), ("b", 1_100, 2), ("c", 1_200, 3), ("d", 1_300, 4),
                                  ("e", 1_400, 5)]
    assert quarantined(spark, src) == [("3-range.parquet", 2, "ts", "bad_record"),
                                       ("3-range.parquet", 3, "ts", "bad_record"),
                                       ("4-corrupt.parquet", None, "<file>", "bad_file"),
                                       ("5-empty.parquet", None, "<file>", "bad_file")]
    assert (first.rows_in, first.stored, first.quarantined) == (9, 5, 4)
    assert first.bad_files == ("4-corrupt.parquet", "5-empty.parquet")
    # The batch log took every file; the bad ones as quarantined, with the reason.
    state = IngestLog(src.manifest, source_id="s").state()
    assert state.taken == {p.name for p in folder.iterdir()}
    assert state.quarantined == {"4-corrupt.parquet", "5-empty.parquet"}
    assert state.pending is None and state.next_id == 1
    [plan] = IngestLog(src.manifest, source_id="s").log.plans()
    problems = dict(plan.carry["files"])
    assert problems["5-empty.parquet"] == "not a readable Parquet file: Parquet file size is 0 bytes"
    assert problems["1-good.parquet"] is None

    # Every read of the table works (no year-10000 partition) and the next batch is normal,
    # including a corrected copy of the corrupt file under a new name.
    assert read_delta(spark, src.table).select("event_date").distinct().count() == 1
    (folder / "6-corrected.parquet").write_bytes(good)
    land_parquet(folder, "7-next.parquet", ("h", 2_000, 8))
    [second] = run_ingest(spark, src)
    assert (second.batch_id, second.stored, second.quarantined) == (1, 3, 0)
    assert stored(spark, src)[-1] == ("h", 2_000, 8)
    assert run_ingest(spark, src) == []


def test_half_committed_batch_with_an_edited_file_is_completed_without_stale_rows(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = source(tmp_path)
    folder = Path(src.landing)
    edited = land_jsonl(folder, "0.jsonl", ("a", 1_000, 1), '{"k": "b", "ts": "late"}')

    crash_run(spark, src, monkeypatch, spark_incremental, "_commit_versions")
    assert delta_version(src.quarantine) is not None and delta_version(src.table) is None
    # Readers see nothing of a batch whose commit point did not land.
    assert read_committed_quarantine(spark, src.quarantine, table_path=src.table,
                                     source_id="s").count() == 0

    # The bad row is fixed in place before the re-run: the stale quarantine row must go.
    land_jsonl(folder, "0.jsonl", ("a", 1_000, 1), ("b", 1_100, 2))
    assert edited.exists()
    [resumed] = run_ingest(spark, src)
    assert (resumed.batch_id, resumed.rows_in, resumed.stored, resumed.quarantined) == (0, 2, 2, 0)
    assert stored(spark, src) == [("a", 1_000, 1), ("b", 1_100, 2)]
    assert read_delta(spark, src.quarantine).count() == 0
    assert run_ingest(spark, src) == []


def test_a_planned_file_removed_before_the_rerun_is_quarantined_not_blocking(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = source(tmp_path, kind="stream")
    folder = Path(src.landing)
    land_jsonl(folder, "0.jsonl", ("a", 1_000, 1))
    land_jsonl(folder, "1.jsonl", ("b", 1_100, 2))

    crash_run(spark, src, monkeypatch, ingest_run, "_ingest_batch")  # after the plan commit
    (folder / "1.jsonl").unlink()
    [resumed] = run_ingest(spark, src)
    assert (resumed.batch_id, resumed.stored, resumed.quarantined, resumed.bad_files) == (
        0, 1, 1, ("1.jsonl",))
    [row] = read_delta(spark, src.quarantine).collect()
    assert row["reason"] == (f"file {folder}/1.jsonl: the file no longer exists (removed after it "
                             f"landed); the whole file is quarantined")


def test_a_second_ingest_waits_then_fails_naming_the_holder(spark: Any, tmp_path: Path) -> None:
    src = source(tmp_path)
    land_jsonl(Path(src.landing), "0.jsonl", ("a", 1_000, 1))
    other = Lease(src.lease, purpose="ingest of s", owner="other-run")
    other.acquire()
    assert ingest_in_progress(src) is not None
    started = time.monotonic()
    with pytest.raises(WriterBusyError, match=r"another writer is running: ingest of s by other-run"):
        run_ingest(spark, src, wait_s=1.0)
    assert time.monotonic() - started >= 1.0
    assert delta_version(src.table) is None and delta_version(src.manifest) is None

    # A bounded wait that the holder ends in time proceeds.
    waited: list[str] = []
    threading.Timer(1.0, other.release).start()
    [summary] = run_ingest(spark, src, wait_s=60, on_wait=lambda h: waited.append(h.owner))
    assert waited == ["other-run"] and summary.stored == 1
    assert ingest_in_progress(src) is None


def test_a_run_whose_plan_commit_was_taken_stops_without_ingesting(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = source(tmp_path)
    folder = Path(src.landing)
    land_jsonl(folder, "0.jsonl", ("a", 1_000, 1))
    run_ingest(spark, src)
    land_jsonl(folder, "1.jsonl", ("b", 1_100, 2))
    versions_at = delta_version(src.table)
    # This run's view of the batch log is stale: it plans batch 0 again, which exists already.
    monkeypatch.setattr(IngestLog, "state",
                        lambda self: IngestState(None, 0, frozenset(), frozenset()))
    with pytest.raises(IngestStateError, match="batch 0 was planned by another ingest run"):
        run_ingest(spark, src)
    assert delta_version(src.table) == versions_at


def test_a_manifest_of_the_old_format_is_rewritten_and_its_unfinished_batch_resumed(
        spark: Any, tmp_path: Path) -> None:
    import shutil

    from joins.lake import AppTxn, write_arrow

    src = source(tmp_path)
    folder = Path(src.landing)
    land_jsonl(folder, "0.jsonl", ("a", 1_000, 1))
    run_ingest(spark, src)
    land_jsonl(folder, "1.jsonl", ("b", 1_100, 2))
    land_jsonl(folder, "2.jsonl", ("c", 1_200, 3))
    (folder / "bad.jsonl").symlink_to(folder / "0.jsonl")
    # What an ingest from before the batch log left: one row per file; batch 1 planned (with
    # a file quarantined whole) and never committed.
    shutil.rmtree(src.manifest)
    write_arrow(pa.table({"batch_id": [0], "file": ["0.jsonl"], "status": ["ingest"],
                          "reason": pa.array([None], pa.string())}), src.manifest,
                app_txn=AppTxn("s.manifest", 0))
    write_arrow(pa.table({"batch_id": [1, 1], "file": ["1.jsonl", "bad.jsonl"],
                          "status": ["ingest", "quarantined"], "reason": [None, "a link"]}),
                src.manifest, app_txn=AppTxn("s.manifest", 1))
    # Read as it is (the pipeline's landing status does so), nothing pending until rewritten.
    old = IngestLog(src.manifest, source_id="s").state()
    assert (old.taken, old.quarantined, old.next_id) == ({"0.jsonl", "1.jsonl", "bad.jsonl"},
                                                         {"bad.jsonl"}, 2)

    resumed = run_ingest(spark, src)
    assert [(r.batch_id, r.files, r.stored, r.quarantined) for r in resumed] == [
        (1, ("1.jsonl", "bad.jsonl"), 1, 1), (2, ("2.jsonl",), 1, 0)]
    assert stored(spark, src) == [("a", 1_000, 1), ("b", 1_100, 2), ("c", 1_200, 3)]
    state = IngestLog(src.manifest, source_id="s").state()
    assert (state.pending, state.next_id, state.quarantined) == (None, 3, {"bad.jsonl"})
    assert [p.batch_id for p in IngestLog(src.manifest, source_id="s").log.plans()] == [0, 1, 2]
    assert run_ingest(spark, src) == []


def test_leftovers_of_a_crashed_write_are_removed_and_its_writer_fenced(spark: Any,
                                                                         tmp_path: Path) -> None:
    src = source(tmp_path)
    folder = Path(src.landing)
    land_jsonl(folder, "0.jsonl", ("a", 1_000, 1))
    run_ingest(spark, src)
    table = Path(src.table)
    staged = table / "_staging" / "20990101T000000-deadbeef" / "event_date=1970-01-01"
    staged.mkdir(parents=True)
    (staged / "part-0.parquet").write_bytes(b"x" * 10)
    placed = table / "event_date=1970-01-01" / "part-orphan.parquet"
    placed.write_bytes(b"x" * 10)
    # Written by a run that crashed a while ago: files from the two seconds before the fence
    # are kept (a coarse mtime could hide that they were written after it).
    for orphan in (staged / "part-0.parquet", placed):
        os.utime(orphan, (time.time() - 60, time.time() - 60))
    version = delta_version(src.table)
    assert version is not None
    # A paused writer planned against this version; the cleaning run will fence it.
    paused_rows = read_delta(spark, src.table)

    # The next run, with nothing new to ingest: it fences the table (one empty commit), then
    # removes what no commit references.
    assert run_ingest(spark, src) == []
    assert not placed.exists()
    assert [p for p in (table / "_staging").rglob("*") if p.is_file()] == []
    assert delta_version(src.table) == version + 1
    with pytest.raises(ConcurrentCommitError):
        write_delta(paused_rows, src.table, mode="append", expected_version=version)
    assert stored(spark, src) == [("a", 1_000, 1)]
    assert run_ingest(spark, src) == [] and delta_version(src.table) == version + 1  # clean: no fence
    land_jsonl(folder, "1.jsonl", ("b", 1_100, 2))
    run_ingest(spark, src)
    assert stored(spark, src) == [("a", 1_000, 1), ("b", 1_100, 2)]


def test_history_retention_is_stored_with_the_table_and_checked(spark: Any, tmp_path: Path) -> None:
    src = source(tmp_path, retention=10_000)
    folder = Path(src.landing)
    land_jsonl(folder, "0.jsonl", ("a", 1_000, 1))
    run_ingest(spark, src)
    assert read_history_retention(src.table) == 10_000
    assert table_properties(src.table)[RETENTION_PROPERTY] == "10000"
    # In the creating commit: a commit of its own (delta-rs's) left a version without
    # delta-spark's checksum, and the next commit replayed the log to list the table's files.
    assert delta_version(src.table) == 0
    assert (Path(src.table) / "_delta_log" / f"{0:020d}.crc").exists()

    land_jsonl(folder, "1.jsonl", ("b", 1_100, 2))
    other = source(tmp_path, retention=5_000)
    with pytest.raises(ConfigError, match=r"built with history_retention_ms = 10000 .* configured "
                                          r"with 5000"):
        run_ingest(spark, other)
    assert stored(spark, src) == [("a", 1_000, 1)]



def test_a_table_from_before_the_property_adopts_the_configured_retention(spark: Any,
                                                                          tmp_path: Path) -> None:
    src = source(tmp_path, retention=7_000)
    old = spark.createDataFrame([("a", 1, 900, False, "s", 0, 0)],
                                "k string, v long, ts long, tombstone boolean, source_id string, "
                                "batch_id long, arrival long")
    write_delta(old.selectExpr("*", "to_date(timestamp_millis(ts)) as event_date"), src.table,
                partition_by=["event_date"])
    assert read_history_retention(src.table) is None
    land_jsonl(Path(src.landing), "0.jsonl", ("b", 1_000, 2))
    run_ingest(spark, src)
    assert read_history_retention(src.table) == 7_000
    assert stored(spark, src) == [("a", 900, 1), ("b", 1_000, 2)]


def test_a_changelog_source_keeps_every_update_with_its_tombstone_flag(spark: Any, tmp_path: Path) -> None:
    """Kind `changelog` (the inputs of the table-table join, filter and aggregate): every row in
    arrival order, out-of-order and deleting rows included, each with its tombstone flag; no
    versioning rule is applied at ingest (the operator applies its own)."""
    src = source(tmp_path, kind="changelog")
    land_jsonl(tmp_path / "landing", "001.jsonl", ("a", 5, 1), ("a", 1, 2), '{"k": "a", "ts": 9, "v": null}')
    land_jsonl(tmp_path / "landing", "002.jsonl", ("b", 0, 3))
    [summary] = run_ingest(spark, src)
    assert (summary.stored, summary.expired, summary.quarantined) == (4, 0, 0)
    rows = read_delta(spark, src.table).orderBy("_seq").collect()
    assert [(r["k"], r["ts"], r["v"], r["tombstone"]) for r in rows] == \
        [("a", 5, 1, False), ("a", 1, 2, False), ("a", 9, None, True), ("b", 0, 3, False)]
    assert len({r["_seq"] for r in rows}) == 4


@pytest.mark.parametrize("failing_read", [1, 2], ids=["planning", "reading"])
def test_a_read_the_store_failed_stops_the_run_and_the_next_run_stores_the_file(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_read: int) -> None:
    # A network error reading a landed file says nothing about the file: quarantined, its good
    # rows would be lost to the table. The run stops before committing anything (a planned
    # batch stays planned) and the next run stores the file.
    from joins.landing import parquet as landing_parquet
    from joins.landing.read_failures import LandingReadError

    src = source(tmp_path, "parquet")
    land_parquet(Path(src.landing), "1.parquet", ("a", 1_000, 1), ("b", 1_100, 2))
    real, reads = landing_parquet.open_landing_file, []

    def flaky(path: str, **kwargs: Any) -> Any:
        reads.append(path)
        if len(reads) == failing_read:   # the plan's footer check, then the read's
            raise ConnectionResetError(104, "Connection reset by peer")
        return real(path, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(landing_parquet, "open_landing_file", flaky)
        with pytest.raises(LandingReadError, match=r"1\.parquet: reading the file failed "
                                                   r"\(\[Errno 104\] Connection reset by peer\)"):
            run_ingest(spark, src)
    state = IngestLog(src.manifest, source_id="s").state()
    assert state.quarantined == set() and not Path(src.table).exists()
    assert (state.pending is not None) == (failing_read == 2)
    [summary] = run_ingest(spark, src)
    assert (summary.batch_id, summary.stored, summary.quarantined) == (0, 2, 0)
    assert stored(spark, src) == [("a", 1_000, 1), ("b", 1_100, 2)]
