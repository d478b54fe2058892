"""The versioned table on Delta Lake, ingest side: one changelog micro-batch per call.

The seed rules (`VersionedStore.put`) are decided for the whole batch at once and in arrival
order, with the same answer as feeding the records one by one:

- a record's stream time is the largest ts of the table and of every earlier record of the batch
  (an expired put never raises it: its ts is below stream time by definition, so a running max
  over *all* earlier records equals the running max over the stored ones);
- the put is expired iff ts < that stream time - history retention; otherwise it is appended;
  equal (key, ts) replacement is left to readers (last sequence wins, see spark_batch).

The running max is a prefix scan without a single-partition window (`stream_time.py`).

Commits (idempotent, application transaction = (source id, batch id), each guarded by the
table version it was decided against, so a concurrent writer makes it fail instead of landing
twice): the quarantine table first, the versions table last. The versions table is the commit
point: it alone defines stream time, so a batch whose quarantine commit landed but whose
versions commit did not is decided again exactly as before; the re-run keeps or replaces the
quarantine rows (see `quarantine.commit_quarantine`) and writes the versions. A batch whose
versions commit landed is complete; a re-run writes nothing. The table stores its history
retention (`retention.py`); an ingest configured otherwise is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from joins.errors import ConfigError, InputRecordError
from joins.spark.exprs import event_date, expired_reason_sql, ident
from joins.spark.frames import SharedFrames, worth_checkpointing
from joins.versioned.batches import (
    IngestReport,
    check_batch_order,
    recorded_batch_report,
)
from joins.versioned.quarantine import (
    KIND_EXPIRED,
    SOURCE_FILE,
    SOURCE_ROW,
    bad_record_quarantine_rows,
    commit_quarantine,
)
from joins.versioned.retention import check_history_retention, retention_configuration
from joins.versioned.spark_store import (
    ARRIVAL,
    BATCH_ID,
    OPERATOR,
    PARTITION_BY,
    SOURCE_ID,
    TOMBSTONE,
    TS,
    TS_MAX_MS,
    TS_MIN_MS,
    VersionedDeltaLayout,
    read_stream_time,
    require_columns,
    ts_out_of_range,
)
from joins.versioned.stream_time import (
    DEFAULT_BLOCK_ROWS,
    DUPLICATE_ARRIVAL,
    STREAM_TIME,
    with_stream_time,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.lake import CommitInfo

# Working columns of the classification.
INVALID_FIELD = "_invalid_field"
STATUS = "_status"
STORED, EXPIRED, INVALID = "stored", "expired", "invalid"


def classify_changelog(changelog: DataFrame, layout: VersionedDeltaLayout, *,
                       stream_time_before: int | None, ts_col: str = TS,
                       tombstone_col: str = TOMBSTONE, arrival_col: str = ARRIVAL,
                       block_rows: int = DEFAULT_BLOCK_ROWS,
                       rows_at_most: int | None = None) -> DataFrame:
    """The changelog with `_stream_time` and `_status`: `stored`, `expired`, or `invalid` (a null
    key column, ts, tombstone flag or arrival index, a ts outside years 1..9999, or a repeated
    arrival index: never stored; `_invalid_field` names the field, the caller reports it)."""
    from pyspark.sql import functions as F

    needed = [*layout.key_columns, *layout.value_columns, ts_col, tombstone_col, arrival_col]
    require_columns(changelog, needed, what="changelog")
    refused_field = F.coalesce(
        *(F.when(F.col(c).isNull(), F.lit(c)) for c in
          [*layout.key_columns, ts_col, tombstone_col, arrival_col]),
        F.when(ts_out_of_range(F.col(ts_col)), F.lit(ts_col)))
    # An invalid record must not move stream time: hide its ts from the prefix scan.
    scanned = changelog.withColumn("_scan_ts", F.when(refused_field.isNull(), F.col(ts_col)))
    timed = with_stream_time(scanned, stream_time_before=stream_time_before, ts_col="_scan_ts",
                             arrival_col=arrival_col, block_rows=block_rows,
                             rows_at_most=rows_at_most).drop("_scan_ts")
    invalid_field = F.coalesce(refused_field, F.when(F.col(DUPLICATE_ARRIVAL), F.lit(arrival_col)))
    st = F.col(STREAM_TIME)
    expired = st.isNotNull() & (F.col(ts_col) < st - F.lit(layout.history_retention_ms))
    status = (F.when(F.col(INVALID_FIELD).isNotNull(), F.lit(INVALID))
              .when(expired, F.lit(EXPIRED)).otherwise(F.lit(STORED)))
    return timed.withColumn(INVALID_FIELD, invalid_field).withColumn(STATUS, status)


def versions_rows(classified: DataFrame, layout: VersionedDeltaLayout, *, source_id: str,
                  batch_id: int, ts_col: str = TS, tombstone_col: str = TOMBSTONE,
                  arrival_col: str = ARRIVAL) -> DataFrame:
    """The stored records in the versions table's layout (a tombstone carries no value)."""
    from pyspark.sql import functions as F

    tomb = F.col(tombstone_col).cast("boolean")
    return classified.where(F.col(STATUS) == STORED).select(
        *layout.key_columns,
        *(F.when(tomb, F.lit(None)).otherwise(F.col(c)).alias(c) for c in layout.value_columns),
        F.col(ts_col).cast("long").alias(TS),
        tomb.alias(TOMBSTONE),
        F.lit(source_id).alias(SOURCE_ID),
        F.lit(batch_id).cast("long").alias(BATCH_ID),
        F.col(arrival_col).cast("long").alias(ARRIVAL),
        event_date(F.col(ts_col)).alias(PARTITION_BY[0]),
    )


def expired_quarantine_rows(classified: DataFrame, layout: VersionedDeltaLayout, *,
                            source_id: str, batch_id: int, ts_col: str = TS,
                            tombstone_col: str = TOMBSTONE, arrival_col: str = ARRIVAL) -> DataFrame:
    """The expired puts as quarantine rows, the reason naming ts, stream time and retention."""
    from pyspark.sql import functions as F

    retention = layout.history_retention_ms
    st = F.col(STREAM_TIME)
    record = F.to_json(F.struct(*layout.key_columns, *layout.value_columns,
                                F.col(ts_col).alias(TS), F.col(tombstone_col).alias(TOMBSTONE)))
    reason = F.expr(expired_reason_sql(ident(ts_col), ident(STREAM_TIME), retention))
    cols = classified.columns
    return classified.where(F.col(STATUS) == EXPIRED).select(
        F.lit(source_id).alias(SOURCE_ID),
        F.lit(batch_id).cast("long").alias(BATCH_ID),
        F.col(arrival_col).cast("long").alias(ARRIVAL),
        F.lit(KIND_EXPIRED).alias("kind"),
        F.lit(ts_col).alias("field"),
        reason.alias("reason"),
        (F.col(SOURCE_FILE) if SOURCE_FILE in cols else F.lit(None)).cast("string").alias(SOURCE_FILE),
        (F.col(SOURCE_ROW) if SOURCE_ROW in cols else F.lit(None)).cast("long").alias(SOURCE_ROW),
        F.col(ts_col).cast("long").alias(TS),
        st.cast("long").alias("stream_time"),
        F.lit(retention).cast("long").alias("history_retention_ms"),
        record.alias("record"),
    )


# ---- commits --------------------------------------------------------------------------------


def _commit_versions(rows: DataFrame, path: str, *, source_id: str, batch_id: int,
                     expected_version: int, history_retention_ms: int) -> CommitInfo:
    from joins.lake import AppTxn, write_delta

    # The creating commit records the retention itself (`configuration` applies only to a write
    # that creates the table). A commit of its own after it, by delta-rs, left that version
    # without delta-spark's checksum, and the table's next commit replayed the whole log in
    # Spark jobs to list its files.
    return write_delta(rows, path, mode="append", partition_by=list(PARTITION_BY),
                       app_txn=AppTxn(source_id, batch_id), expected_version=expected_version,
                       commit_message=f"versions of batch {batch_id} from {source_id}",
                       configuration=retention_configuration(history_retention_ms))


def ingest_changelog(spark: SparkSession, changelog: DataFrame, layout: VersionedDeltaLayout, *,
                     versions_path: str, quarantine_path: str, source_id: str, batch_id: int,
                     ts_col: str = TS, tombstone_col: str = TOMBSTONE, arrival_col: str = ARRIVAL,
                     bad_records: DataFrame | None = None,
                     block_rows: int = DEFAULT_BLOCK_ROWS,
                     rows_at_most: int | None = None,
                     before_commit: Callable[[], None] | None = None) -> IngestReport:
    """Apply one changelog micro-batch to the versioned Delta table at `versions_path`.

    `changelog` has the layout's key and value columns, an integer event-time column `ts_col`
    (ms), a boolean `tombstone_col` and a unique integer `arrival_col` (the order the records
    arrived in; the seed rules are applied in that order). Optional `source_file`/`source_row`
    columns are carried into quarantine rows. `bad_records` (columns BAD_RECORD_COLUMNS) are
    input records a reader refused; they are quarantined in the same commit as expired puts.
    `before_commit` is called before each commit (a writer lease's `check`). `rows_at_most`, when
    the caller knows a bound on the changelog's records without a job (rows it built), saves
    one (`stream_time.with_stream_time`), and a small batch's classification is then checkpointed
    rather than cached.

    Batch ids of one source must increase; re-running a committed batch writes nothing and
    returns a `skipped` report. A record with a null key, ts, tombstone flag or arrival index,
    or a ts outside years 1..9999, raises InputRecordError (naming its arrival index and the
    field) before anything is written. A history retention other than the one stored with the
    table raises ConfigError.
    """
    from pyspark.sql import functions as F

    from joins.lake import delta_version

    if not source_id:
        raise ConfigError(f"{OPERATOR}: source_id must be a non-empty string")
    if batch_id < 0:
        raise ConfigError(f"{OPERATOR}: batch_id must be >= 0, got {batch_id}")
    check_history_retention(versions_path, layout.history_retention_ms, before_commit=before_commit)
    recorded = recorded_batch_report(spark, versions_path=versions_path,
                                     quarantine_path=quarantine_path, source_id=source_id,
                                     batch_id=batch_id)
    if recorded is not None:
        return recorded
    check_batch_order(main_path=versions_path, quarantine_path=quarantine_path,
                      source_id=source_id, batch_id=batch_id)

    # Decided against this version and committed only on top of it.
    version = delta_version(versions_path)
    stream_time_before = None if version is None else read_stream_time(spark, versions_path,
                                                                        version=version)
    classified = classify_changelog(changelog, layout, stream_time_before=stream_time_before,
                                    ts_col=ts_col, tombstone_col=tombstone_col,
                                    arrival_col=arrival_col, block_rows=block_rows,
                                    rows_at_most=rows_at_most)
    # Read by the counts' job, then by the versions' write (and the quarantine's): a batch known
    # to be small is checkpointed, so that the writes are analysed from a leaf.
    shared = SharedFrames(worth_checkpointing(rows_at_most))
    classified = shared.keep(classified)
    bad = None if bad_records is None else bad_record_quarantine_rows(
        bad_records, source_id=source_id, batch_id=batch_id).persist()
    try:
        stats = classified.groupBy(STATUS).agg(
            F.count("*").alias("n"), F.max(ts_col).alias("max_ts")).collect()
        counts = {r[STATUS]: int(r["n"]) for r in stats}
        if counts.get(INVALID):
            _raise_first_invalid(classified, ts_col=ts_col, arrival_col=arrival_col)
        stored_max = next((r["max_ts"] for r in stats if r[STATUS] == STORED), None)
        stream_time_after = stream_time_before
        if stored_max is not None:
            stream_time_after = int(stored_max) if stream_time_before is None \
                else max(stream_time_before, int(stored_max))
        n_bad = 0 if bad is None else bad.count()
        n_expired = counts.get(EXPIRED, 0)

        def rows() -> DataFrame:
            expired = expired_quarantine_rows(classified, layout, source_id=source_id,
                                              batch_id=batch_id, ts_col=ts_col,
                                              tombstone_col=tombstone_col, arrival_col=arrival_col)
            return expired if bad is None else expired.unionByName(bad)

        quarantine_commit = commit_quarantine(rows, quarantine_path, source_id=source_id,
                                              batch_id=batch_id, count=n_expired + n_bad,
                                              before_commit=before_commit)
        if before_commit is not None:
            before_commit()
        # Written even when empty: the versions commit is what marks the batch as done.
        versions_commit = _commit_versions(
            versions_rows(classified, layout, source_id=source_id, batch_id=batch_id, ts_col=ts_col,
                          tombstone_col=tombstone_col, arrival_col=arrival_col),
            versions_path, source_id=source_id, batch_id=batch_id,
            expected_version=-1 if version is None else version,
            history_retention_ms=layout.history_retention_ms)
    finally:
        shared.release()
        if bad is not None:
            bad.unpersist()
    stored = counts.get(STORED, 0)
    return IngestReport(source_id=source_id, batch_id=batch_id, rows_in=stored + n_expired + n_bad,
                        stored=stored, expired=n_expired, quarantined=n_bad,
                        stream_time_before=stream_time_before, stream_time_after=stream_time_after,
                        skipped=False, versions_commit=versions_commit,
                        quarantine_commit=quarantine_commit)


def _raise_first_invalid(classified: DataFrame, *, ts_col: str, arrival_col: str) -> None:
    from pyspark.sql import functions as F

    # A record without an arrival index orders first: min_by would skip a null ordering.
    order = F.coalesce(F.col(arrival_col).cast("long"), F.lit(-(1 << 63)).cast("long"))
    row = classified.where(F.col(STATUS) == INVALID).agg(
        F.min_by(F.struct(F.col(INVALID_FIELD).alias("field"), F.col(arrival_col).alias("a"),
                          F.col(ts_col).cast("long").alias("ts")),
                 order).alias("first")).first()
    assert row is not None and row["first"] is not None
    field, index, ts = row["first"]["field"], row["first"]["a"], row["first"]["ts"]
    if field == arrival_col and index is not None:
        message = "arrival index appears more than once (arrival order must be total)"
    elif field == ts_col and ts is not None:
        message = (f"out of range: {ts} ms is not within years 1..9999 "
                   f"({TS_MIN_MS}..{TS_MAX_MS} ms since the epoch)")
    else:
        message = ("must not be null (a versioned table record needs a key, an event time, a "
                   "tombstone flag and an arrival index)")
    raise InputRecordError(message, index=index, field=field, source=f"{OPERATOR} changelog")
