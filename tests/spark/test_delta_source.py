"""A user's Delta table, written with plain PySpark + delta-spark, read as a changelog source
(`joins.landing.reader.read_delta_changes`): the change data feed (deletes as tombstones at their
commit's time, pre-images ignored), appends without it, TIMESTAMP event times, bad rows with
the table and version as their source, and the refusal of a delete without the feed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.landing.reader import LandingRecordError, read_delta_changes
from joins.landing.spec import LandingSpec

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)
T0_MS = int(T0.timestamp() * 1000)


def _spec(**extra: Any) -> LandingSpec:
    return LandingSpec.model_validate({
        "format": "delta", "key_columns": [{"name": "currency", "type": "string"}],
        "value_columns": [{"name": "rate", "type": "double"}], "ts_column": "updated_at", **extra})


def _sql(spark: Any, path: Path, statement: str) -> None:
    spark.sql(statement.replace("{t}", f"delta.`{path}`"))


def _changelog(batch: Any) -> list[tuple[Any, ...]]:
    return sorted(((r["currency"], r["rate"], r["ts"], r["tombstone"], r["source_row"])
                   for r in batch.changelog.collect()), key=lambda r: (r[2], r[0]))


def _commit_ms(spark: Any, path: Path, version: int) -> int:
    """The commit's time as delta-spark tells it (the feed's `_commit_timestamp`)."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where(f"version = {version}")
    return int(history.selectExpr("unix_millis(timestamp)").first()[0])


def test_change_data_feed_is_a_changelog(spark, tmp_path: Path) -> None:
    path = tmp_path / "rates"
    _sql(spark, path, "CREATE TABLE {t} (currency STRING, rate DOUBLE, updated_at TIMESTAMP) "
                      "USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
                      "'delta.enableDeletionVectors' = 'true')")                        # v0
    _sql(spark, path, "INSERT INTO {t} VALUES ('EUR', 1.1, TIMESTAMP'2024-03-01 12:00:00'), "
                      "('GBP', 0.8, TIMESTAMP'2024-03-01 12:00:01'), "
                      "(NULL, 9.9, TIMESTAMP'2024-03-01 12:00:02')")                     # v1
    _sql(spark, path, "UPDATE {t} SET rate = 1.2, updated_at = TIMESTAMP'2024-03-01 12:05:00' "
                      "WHERE currency = 'EUR'")                                           # v2
    _sql(spark, path, "DELETE FROM {t} WHERE currency = 'GBP'")                          # v3

    batch = read_delta_changes(spark, str(path), 0, 3, _spec(on_bad_record="quarantine"))
    deleted_at = _commit_ms(spark, path, 3)
    assert _changelog(batch) == [
        ("EUR", 1.1, T0_MS, False, 2),            # v1 in key order: EUR, GBP (null key: row 1)
        ("GBP", 0.8, T0_MS + 1_000, False, 3),
        ("EUR", 1.2, T0_MS + 300_000, False, 1),  # v2: the post-image only
        ("GBP", None, deleted_at, True, 1),       # v3: a tombstone at the delete's commit time
    ]
    bad = batch.bad_records.collect()
    assert [(r["field"], r["source_file"], r["source_row"]) for r in bad] == [
        ("currency", f"{path}@v1", 1)]
    assert "currency" in bad[0]["reason"] and "null" in bad[0]["reason"]

    with pytest.raises(LandingRecordError, match=r"rates@v1, row 1, field .currency.: must not be null"):
        read_delta_changes(spark, str(path), 0, 1, _spec(on_bad_record="fail"))


def test_appends_with_a_tombstone_column_and_epoch_ms(spark, tmp_path: Path) -> None:
    path = tmp_path / "accounts"
    rows = [("EUR", 1.0, T0_MS, False), ("USD", 2.0, T0_MS + 1, False)]
    schema = "currency string, rate double, updated_at long, closed boolean"
    spark.createDataFrame(rows[:1], schema).write.format("delta").save(str(path))      # v0
    spark.createDataFrame([*rows[1:], ("EUR", None, T0_MS + 2, True)], schema) \
        .coalesce(1).write.format("delta").mode("append").save(str(path))              # v1

    batch = read_delta_changes(spark, str(path), -1, 1, _spec(tombstone_column="closed"))
    got = sorted((r["arrival"], r["currency"], r["rate"], r["ts"], r["tombstone"])
                 for r in batch.changelog.collect())
    assert got == [(0, "EUR", 1.0, T0_MS, False),
                   ((1 << 40) + 0, "USD", 2.0, T0_MS + 1, False),
                   ((1 << 40) + 1, "EUR", None, T0_MS + 2, True)]   # files' own row order

    _sql(spark, path, "DELETE FROM {t} WHERE currency = 'USD'")                           # v2
    with pytest.raises(lake.LakeError, match="version 2 removed data files"):
        read_delta_changes(spark, str(path), 1, 2, _spec(tombstone_column="closed"))


def test_ingest_batches_end_before_a_metadata_change(spark, tmp_path: Path) -> None:
    """The feed turned on after some appends: one batch reads the appends, the next starts at
    the commit that turned it on and reads the feed (an update, a delete); a second run finds
    nothing new."""
    from joins.ingest import IngestSource, run_ingest

    path = tmp_path / "rates"
    schema = "currency string, rate double, updated_at long"
    spark.createDataFrame([("EUR", 1.0, T0_MS), ("USD", 2.0, T0_MS)], schema) \
        .write.format("delta").save(str(path))                                           # v0
    spark.createDataFrame([("GBP", 3.0, T0_MS + 1)], schema) \
        .write.format("delta").mode("append").save(str(path))                            # v1
    _sql(spark, path, "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    _sql(spark, path, f"UPDATE {{t}} SET rate = 1.5, updated_at = {T0_MS + 2} WHERE currency = 'EUR'")
    lake_root = tmp_path / "lake"
    source = IngestSource(
        name="rates", kind="table", landing=str(path), spec=_spec(on_bad_record="quarantine"),
        table=str(lake_root / "tables" / "rates"), quarantine=str(lake_root / "quarantine"),
        manifest=str(lake_root / "manifest"), lease=str(lake_root / "lease"),
        history_retention_ms=86_400_000 * 365 * 10)

    first = run_ingest(spark, source)
    assert [(s.batch_id, s.files, s.stored) for s in first] == [
        (0, ("rates@v0..v1",), 3), (1, ("rates@v2..v3",), 1)]
    assert run_ingest(spark, source) == []
    stored = sorted((r["currency"], r["rate"], r["ts"]) for r in lake.read_delta(spark, source.table)
                    .where("NOT tombstone").collect())
    assert stored == [("EUR", 1.0, T0_MS), ("EUR", 1.5, T0_MS + 2), ("GBP", 3.0, T0_MS + 1),
                      ("USD", 2.0, T0_MS)]
