"""The one place the Dagster layer calls the engine (`joins`).

Assets, sensors and checks use only the functions and report types below, so a renamed engine
function or report field is fixed here and nowhere else. Reports are turned into small frozen
dataclasses of plain numbers, which is also what the materialization metadata is made of.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assets.specs import JoinSpec
from joins.ingest import SEQ
from joins.operators.stream_table_join.spark_incremental import LatenessStats
from joins.operators.stream_table_join.state import JoinPaths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from assets.layout import JoinLayout
    from joins.operators.stream_table_join.columns import JoinColumns
    from joins.operators.versioned_table.spark_batch import VersionedDeltaLayout

# ---- lake -------------------------------------------------------------------------------------


def delta_version(path: str) -> int | None:
    """The table's latest Delta version, None when there is no table yet."""
    from joins.lake import delta_version as _delta_version

    return _delta_version(path)


def table_exists(path: str) -> bool:
    from joins.lake import table_exists as _table_exists

    return _table_exists(path)


def read_table(spark: SparkSession, path: str, *, version: int | None = None,
               columns: Sequence[str] | None = None) -> DataFrame:
    from joins.lake import read_delta

    return read_delta(spark, path, version=version, columns=columns)


# ---- join -------------------------------------------------------------------------------------


def join_paths(root: str) -> JoinPaths:
    """The engine's table layout of one incremental join under `root`."""
    return JoinPaths(root)


@dataclass(frozen=True)
class ScratchOutputPaths(JoinPaths):
    """The join's tables under `root`, except that the output goes to `scratch_output`: a
    backfill run with these paths reads the join's state and writes nowhere that matters."""

    scratch_output: str = ""

    @property
    def output(self) -> str:
        return self.scratch_output


def join_columns(spec: JoinSpec) -> JoinColumns:
    """Column roles of our lake layout: the sources keep their declared key names."""
    from joins.operators.stream_table_join.columns import JoinColumns as _JoinColumns

    return _JoinColumns(key=spec.stream.key_column, table_key=spec.table.key_column)


# How far behind stream time a batch's stream records arrived: the engine's own statistics.
Lateness = LatenessStats


@dataclass(frozen=True)
class MicroBatchSummary:
    """One micro-batch of the join (`skipped`: nothing new, or already committed)."""

    batch_id: int | None
    skipped: bool
    skip_reason: str | None
    stream_versions: tuple[int, int] | None
    table_versions: tuple[int, int] | None
    output_version: int | None
    rows_in_stream: int
    rows_in_table: int | None
    rows_out: int
    late_joined: int
    late_dropped: int
    quarantined: int
    still_buffered: int
    stream_time: int | None
    table_stream_time: int | None
    event_days_touched: tuple[str, ...]
    lateness: Lateness

    @property
    def rows_in(self) -> int:
        return self.rows_in_stream + (self.rows_in_table or 0)


def join_microbatch(spark: SparkSession, spec: JoinSpec, *, join_root: str, stream_source: str,
                    table_source: str) -> MicroBatchSummary:
    """The next micro-batch of the join (exactly once: a crashed batch is re-run first)."""
    from joins.operators.stream_table_join.spark_incremental import run_microbatch

    paths = join_paths(join_root)
    r = run_microbatch(spark, spec.engine_spec(), paths, stream_source=stream_source,
                       table_source=table_source, columns=join_columns(spec))
    lat = r.lateness
    return MicroBatchSummary(
        batch_id=r.batch_id, skipped=r.skipped, skip_reason=r.skip_reason,
        stream_versions=r.stream_versions, table_versions=r.table_versions,
        output_version=r.commits.get("output") if r.commits else None,
        rows_in_stream=r.rows_in_stream, rows_in_table=r.rows_in_table, rows_out=r.rows_out,
        late_joined=r.late_joined, late_dropped=r.late_dropped, quarantined=r.quarantined,
        still_buffered=r.still_buffered, stream_time=r.stream_time,
        table_stream_time=r.table_stream_time, event_days_touched=tuple(r.event_days_touched),
        lateness=lat)


@dataclass(frozen=True)
class BackfillSummary:
    """A backfill of event days: output rows before and after, and per day how many rows the
    backfill added, removed or changed (matched by stream record)."""

    days: tuple[str, ...]
    rows_in: int
    rows_out: int
    rows_before: int
    rows_added: int
    rows_removed: int
    rows_changed: int
    excluded_buffered: int
    output_version: int | None
    per_day: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def agrees(self) -> bool:
        return self.rows_added == 0 and self.rows_removed == 0 and self.rows_changed == 0


def join_backfill(spark: SparkSession, spec: JoinSpec, *, join_root: str, stream_source: str,
                  table_source: str, days: Sequence[str]) -> BackfillSummary:
    """Recompute `days` from the full history and replace them in the output in one commit."""
    from joins.operators.stream_table_join.backfill import backfill

    r = backfill(spark, spec.engine_spec(), join_paths(join_root), stream_source=stream_source,
                 table_source=table_source, days=list(days), columns=join_columns(spec))
    return BackfillSummary(
        days=tuple(r.days), rows_in=r.rows_in, rows_out=r.rows_after, rows_before=r.rows_before,
        rows_added=r.added, rows_removed=r.removed, rows_changed=r.changed,
        excluded_buffered=r.excluded_buffered,
        output_version=r.commit_version if r.commit_version is not None else r.output_version_before,
        per_day={d.day: {"before": d.rows_before, "after": d.rows_after, "added": d.added,
                         "removed": d.removed, "changed": d.changed} for d in r.per_day})


@dataclass(frozen=True)
class DayComparison:
    """One event day of the output against the batch form of the same day."""

    day: str
    rows_output: int
    rows_batch: int
    only_output: int
    only_batch: int

    @property
    def agrees(self) -> bool:
        return self.only_output == 0 and self.only_batch == 0


def compare_day_with_batch(spark: SparkSession, spec: JoinSpec, layout: JoinLayout,
                           day: str) -> DayComparison:
    """Recompute `day` with the engine's backfill, writing into a scratch table instead of the
    output (the join's own state, its batch log and buffer, is only read), then compare the
    scratch rows with the output's rows of that day in Spark: two `exceptAll` counts, no rows
    on the driver. The scratch table is removed afterwards."""
    import uuid

    from pyspark.sql import functions as F

    from joins.operators.stream_table_join.backfill import backfill
    from joins.operators.stream_table_join.columns import BATCH_ID, EMIT_SEQ, LATE

    scratch = f"{layout.root.rstrip('/')}/scratch/{spec.name}/agreement-{day}-{uuid.uuid4().hex[:8]}"
    paths = ScratchOutputPaths(root=layout.join_root, scratch_output=scratch)
    try:
        backfill(spark, spec.engine_spec(), paths, stream_source=layout.stream_events,
                 table_source=layout.table_versions, days=[day], columns=join_columns(spec))
        output = read_table(spark, layout.output).where(F.col("event_date") == F.lit(day).cast("date"))
        # No scratch table: the batch form has no row for that day.
        batch = read_table(spark, scratch) if table_exists(scratch) else output.limit(0)
        # Lineage columns say which batch emitted a row and when; the data must be equal.
        compared = [c for c in output.columns if c not in (BATCH_ID, EMIT_SEQ, LATE)]
        out, bat = output.select(*compared), batch.select(*compared)
        return DayComparison(day=day, rows_output=out.count(), rows_batch=bat.count(),
                             only_output=out.exceptAll(bat).count(),
                             only_batch=bat.exceptAll(out).count())
    finally:
        _remove_tree(scratch)


def _remove_tree(path: str) -> None:
    import pyarrow.fs as pafs

    if "://" in path:
        fs, inner = pafs.FileSystem.from_uri(path)
    else:
        fs, inner = pafs.LocalFileSystem(), path
    if fs.get_file_info(inner).type != pafs.FileType.NotFound:
        fs.delete_dir(inner)


def join_stream_time(spark: SparkSession, *, join_root: str) -> tuple[int | None, int | None]:
    """(stream time of the grace buffer, table stream time) after the last completed batch."""
    from joins.operators.stream_table_join.state import CheckpointLog

    done = CheckpointLog(spark, join_paths(join_root).checkpoints).state().last_done
    if done is None:
        return None, None
    return done.stream_time_after, done.table_stream_time_after


# ---- checks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Duplicates:
    rows: int
    duplicated_records: int   # stream records (by arrival sequence) present more than once
    extra_rows: int           # rows beyond the first of each such record


def duplicate_output_rows(spark: SparkSession, output_path: str) -> Duplicates:
    """Duplicates in the output by stream record identity (its arrival sequence): one aggregate."""
    from pyspark.sql import functions as F

    if not table_exists(output_path):
        return Duplicates(0, 0, 0)
    out = read_table(spark, output_path, columns=[SEQ])
    per = out.groupBy(SEQ).agg(F.count(F.lit(1)).alias("n"))
    row = per.agg(F.sum("n").alias("rows"),
                  F.sum(F.when(F.col("n") > 1, 1).otherwise(0)).alias("dup"),
                  F.sum(F.col("n") - 1).alias("extra")).first()
    return Duplicates(int(row["rows"] or 0) if row else 0, int(row["dup"] or 0) if row else 0,
                      int(row["extra"] or 0) if row else 0)


@dataclass(frozen=True)
class QuarantineCounts:
    """Input rows of both sources and the rows quarantined anywhere, by (where, kind)."""

    rows_in: int
    quarantined: int
    by_kind: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def share(self) -> float:
        return self.quarantined / self.rows_in if self.rows_in else 0.0


def quarantine_counts(spark: SparkSession, layout: JoinLayout) -> QuarantineCounts:
    """rows in = stored + quarantined rows of each source; quarantined = both sources'
    quarantine tables (rows of batches whose commit point landed) plus the join's (late stream
    records under `late: quarantine`, which are stream rows already counted in)."""
    from joins.operators.versioned_table.quarantine import read_committed_quarantine

    by_kind: dict[tuple[str, str], int] = {}
    rows_in = 0
    for source in (layout.spec.stream, layout.spec.table):
        rows_in += count_rows(spark, layout.table(source))
        q = read_committed_quarantine(spark, layout.quarantine(source),
                                      table_path=layout.table(source), source_id=source.name)
        for kind, n in ({} if q is None else _by_kind(q)).items():
            by_kind[(source.name, kind)] = n
            rows_in += n
    join_q = count_rows(spark, layout.join_quarantine)
    if join_q:
        by_kind[(layout.spec.name, "late")] = join_q
    return QuarantineCounts(rows_in=rows_in, quarantined=sum(by_kind.values()), by_kind=by_kind)


def count_rows(spark: SparkSession, path: str) -> int:
    """Rows of a table (0 when it does not exist): a Spark count, nothing collected."""
    if not table_exists(path):
        return 0
    return read_table(spark, path).count()


def _by_kind(df: DataFrame) -> dict[str, int]:
    """{reason kind: rows} of a quarantine table (one tiny aggregate row per kind)."""
    from pyspark.sql import functions as F

    kind = F.col("kind") if "kind" in df.columns else F.lit("late")
    return {str(r["k"]): int(r["n"]) for r in
            df.groupBy(kind.alias("k")).agg(F.count("*").alias("n")).collect()}


# ---- versioned table reads (demo, UI) ----------------------------------------------------------


def versioned_layout(spec: JoinSpec) -> VersionedDeltaLayout:
    from joins.landing import table_layout

    return table_layout(spec.table.landing_spec(), spec.history_retention_ms)


def table_stream_time(spark: SparkSession, path: str) -> int | None:
    """The versioned table's stream time (largest ts stored; None: no table yet)."""
    from joins.operators.versioned_table.spark_batch import read_stream_time

    return read_stream_time(spark, path)


def versions_of_key(spark: SparkSession, spec: JoinSpec, path: str, key: Any) -> list[dict[str, Any]]:
    """Every stored version of one key, oldest first: ts, values, tombstone, valid_to (the next
    version's ts; None while current). Collects one key's history: for display only."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from joins.operators.versioned_table.spark_batch import TOMBSTONE, TS, current_versions

    layout = versioned_layout(spec)
    key_col = spec.table.key_column
    cur = current_versions(read_table(spark, path), layout).where(F.col(key_col) == F.lit(key))
    ordered = cur.withColumn("valid_to", F.lead(TS).over(Window.partitionBy(key_col).orderBy(TS)))
    rows = ordered.select(TS, *layout.value_columns, TOMBSTONE, "valid_to").orderBy(TS).collect()
    return [r.asDict() for r in rows]


def lookup_as_of(spark: SparkSession, spec: JoinSpec, path: str,
                 pairs: Sequence[tuple[Any, int]]) -> list[dict[str, Any]]:
    """get(key, as_of) of the versioned table for a few (key, as_of) pairs, in the given order."""
    from pyspark.sql import functions as F

    from joins.landing.spec import SPARK_TYPES
    from joins.operators.versioned_table.spark_batch import read_lookup_as_of

    key_col = spec.table.key_column
    key_type = spec.table.key_columns[0].type
    frame = spark.createDataFrame(
        [(i, k, ts) for i, (k, ts) in enumerate(pairs)],
        f"_i long, {key_col} {SPARK_TYPES[key_type]}, as_of long")
    out = read_lookup_as_of(spark, path, versioned_layout(spec), frame, how="left")
    rows = out.orderBy(F.col("_i")).drop("_i").collect()
    return [r.asDict() for r in rows]
