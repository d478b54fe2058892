"""The versioned table on Delta Lake, batch side: layout, as-of reads and compaction.

Seeds 000/002 (KIP-889/914) at batch scale. The table is an append-only log of versions; see
docs/versioned_tables.md for the layout and why each rule of `VersionedStore` holds:

- one row per stored put: key columns, value columns (null for a tombstone), `ts` (event time,
  int ms), `tombstone`, the sequence (`batch_id`, `arrival`) that orders puts of the same
  (key, ts) (the later arrival replaces the earlier), `source_id`, and `event_date` (UTC date of
  `ts`, the partition column);
- stream time is the largest `ts` in the table (every stored put raised it to at least its ts,
  and compaction always keeps each key's latest version, hence the overall maximum);
- readers take the last sequence per (key, ts) (`current_versions`); compaction rewrites the log
  without superseded puts and without history that no read can reach any more.

Every function here is a pure DataFrame transformation except the `read_*` / `compact` wrappers,
which go through `joins.lake` (the only module that talks to Delta).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, StrictStr, model_validator

from joins.core.time import DurationMs
from joins.errors import ConfigError
from joins.spec import Spec, parse_spec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.lake import CommitInfo

OPERATOR = "versioned_table (Delta)"

# Columns the table owns. User key/value columns must not take these names.
TS = "ts"
TOMBSTONE = "tombstone"
SOURCE_ID = "source_id"
BATCH_ID = "batch_id"
ARRIVAL = "arrival"
EVENT_DATE = "event_date"
RESERVED_COLUMNS: frozenset[str] = frozenset({TS, TOMBSTONE, SOURCE_ID, BATCH_ID, ARRIVAL, EVENT_DATE})
PARTITION_BY: tuple[str, ...] = (EVENT_DATE,)

# Output columns of the as-of reads (besides key and value columns).
VALID_FROM = "valid_from"
VALID_TO = "valid_to"
_LOOKUP_KEY = "_vt_lookup_key"


class VersionedDeltaLayout(Spec):
    """Which columns of a versioned Delta table are the key and the value, and its history
    retention (which doubles as the grace period of puts, as in the seeds)."""

    key_columns: tuple[StrictStr, ...] = Field(min_length=1)
    value_columns: tuple[StrictStr, ...] = ()
    history_retention_ms: DurationMs

    @model_validator(mode="after")
    def _names_are_usable(self) -> VersionedDeltaLayout:
        seen: set[str] = set()
        for group, names in (("key_columns", self.key_columns), ("value_columns", self.value_columns)):
            for name in names:
                if name in RESERVED_COLUMNS:
                    raise ValueError(f"{group}: column name {name!r} is reserved by the table layout "
                                     f"({', '.join(sorted(RESERVED_COLUMNS))})")
                if name in seen:
                    raise ValueError(f"{group}: column {name!r} is listed twice")
                seen.add(name)
        return self

    @classmethod
    def parse(cls, config: Any) -> VersionedDeltaLayout:
        """Validate a config dict; a bad one raises ConfigError naming the key."""
        return parse_spec(cls, config, operator=OPERATOR)

    @property
    def version_columns(self) -> list[str]:
        """The columns of the versions table, in order."""
        return [*self.key_columns, *self.value_columns, TS, TOMBSTONE, SOURCE_ID, BATCH_ID, ARRIVAL,
                EVENT_DATE]


def expiry_bound(stream_time: int | None, history_retention_ms: int) -> int | None:
    """Oldest ts a put may have and oldest as_of history still answers (None: empty table)."""
    return None if stream_time is None else stream_time - history_retention_ms


# The event times a table holds: epoch ms within years 1..9999 (UTC), the range of a date, so
# that `event_date` (the partition column) exists for every stored ts. Outside it Spark cannot
# form the date (DATETIME_OVERFLOW beyond |ts| ~ 9.2e15, "year out of range" on every read
# of a year-10000 partition), so such a record is refused or quarantined, never written.
TS_MIN_MS = -62_135_596_800_000        # 0001-01-01T00:00:00.000Z
TS_MAX_MS = 253_402_300_799_999        # 9999-12-31T23:59:59.999Z


def ts_out_of_range(ts: Column, lo: int = TS_MIN_MS, hi: int = TS_MAX_MS) -> Column:
    """True where `ts` (non-null) lies outside [lo, hi]."""
    from pyspark.sql import functions as F

    return (ts < F.lit(lo)) | (ts > F.lit(hi))


def require_columns(df: DataFrame, columns: list[str], *, what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(f"{OPERATOR}: {what} lacks column(s) {', '.join(map(repr, missing))} "
                          f"(has {', '.join(df.columns)})")


def current_versions(versions: DataFrame, layout: VersionedDeltaLayout) -> DataFrame:
    """One row per (key, ts): the put with the largest sequence (batch_id, arrival).

    An aggregate, not a window: partial aggregation keeps a key with a long history from
    landing on one task."""
    from pyspark.sql import functions as F

    require_columns(versions, layout.version_columns, what="versions table")
    group = [*layout.key_columns, TS]
    payload = [c for c in layout.version_columns if c not in group]
    winner = F.max_by(F.struct(*payload), F.struct(BATCH_ID, ARRIVAL)).alias("_winner")
    return versions.groupBy(*group).agg(winner).select(*group, *(F.col(f"_winner.{c}").alias(c)
                                                                  for c in payload))


def stream_time_of(versions: DataFrame) -> int | None:
    """The table's stream time: the largest ts stored (None for an empty table)."""
    from pyspark.sql import functions as F

    row = versions.agg(F.max(TS).alias("st")).first()
    return None if row is None or row["st"] is None else int(row["st"])


def snapshot_as_of(versions: DataFrame, layout: VersionedDeltaLayout, as_of: int,
                   stream_time: int | None) -> DataFrame:
    """Each key's value valid at event time `as_of`, with `get(key, as_of)`'s rules:

    the version with the largest ts <= as_of; a tombstone reads as absent; an as_of older than
    stream time minus history retention reads absent, except the key's latest version (it never
    expires). Columns: keys, values, valid_from, valid_to (null while still valid)."""
    from pyspark.sql import functions as F

    cur = current_versions(versions, layout)
    ts = F.col(TS)
    # ts is unique per key after current_versions, so the struct max never compares values.
    candidate = F.max(F.when(ts <= as_of, F.struct(ts.alias("ts"), F.col(TOMBSTONE).alias("tomb"),
                                                   *(F.col(c) for c in layout.value_columns))))
    per_key = cur.groupBy(*layout.key_columns).agg(
        candidate.alias("_c"),
        F.min(F.when(ts > as_of, ts)).alias(VALID_TO),
        F.max(ts).alias("_latest"),
    )
    keep = F.col("_c").isNotNull() & ~F.col("_c.tomb")
    bound = expiry_bound(stream_time, layout.history_retention_ms)
    if bound is not None and as_of < bound:
        keep = keep & (F.col("_c.ts") == F.col("_latest"))
    return per_key.where(keep).select(
        *layout.key_columns, *(F.col(f"_c.{c}").alias(c) for c in layout.value_columns),
        F.col("_c.ts").alias(VALID_FROM), VALID_TO)


def compaction_plan(versions: DataFrame, layout: VersionedDeltaLayout,
                    stream_time: int | None) -> DataFrame:
    """The versions a compaction keeps: per (key, ts) only the winning put, and per key every
    version with ts > bound plus the last one at or before the bound (it answers as_of values in
    [bound, next ts)). A version whose successor starts at or before the bound can never be
    read again, exactly as `VersionedStore._cleanup` reclaims it; the latest version of a key is
    always kept, so stream time (max ts) is unchanged."""
    from pyspark.sql import functions as F

    cur = current_versions(versions, layout)
    bound = expiry_bound(stream_time, layout.history_retention_ms)
    if bound is None:
        return cur.select(*layout.version_columns)
    # An aggregate + join rather than a lead() window: a key with a huge history is not one task.
    floors = cur.where(F.col(TS) <= bound).groupBy(*layout.key_columns).agg(F.max(TS).alias("_floor"))
    kept = cur.join(floors, on=list(layout.key_columns), how="left").where(
        F.col("_floor").isNull() | (F.col(TS) >= F.col("_floor")))
    return kept.select(*layout.version_columns)


def lookup_as_of(pairs: DataFrame, versions: DataFrame, layout: VersionedDeltaLayout, *,
                 stream_time: int | None, pair_key_columns: list[str] | None = None,
                 as_of_column: str = "as_of", how: Literal["left", "inner"] = "left") -> DataFrame:
    """`get(key, as_of)` for many (key, as_of) pairs at once: each pair row gets the table's value
    columns and `valid_from` as of its own as_of (nulls where get answers null; `inner` drops
    those pairs). `pair_key_columns` name the pairs' key columns, in the layout's key order
    (default: the same names).

    Delegates to the generic as-of join (joins.asof), so the table and the join agree
    on one implementation of the get rules."""
    from pyspark.sql import functions as F

    from joins.asof import asof_join

    pair_keys = list(pair_key_columns or layout.key_columns)
    if len(pair_keys) != len(layout.key_columns):
        raise ConfigError(f"{OPERATOR}: pair_key_columns has {len(pair_keys)} column(s), the table "
                          f"key has {len(layout.key_columns)}")
    require_columns(pairs, [*pair_keys, as_of_column], what="pairs")
    if _LOOKUP_KEY in pairs.columns:
        raise ConfigError(f"{OPERATOR}: pairs must not have a column named {_LOOKUP_KEY!r}")
    # asof_join takes one key column: a composite key travels as a struct with the table's field
    # names on both sides, so struct equality is key equality.
    probe = pairs.withColumn(_LOOKUP_KEY, F.struct(*(F.col(p).alias(k) for p, k in
                                                      zip(pair_keys, layout.key_columns, strict=True))))
    table = current_versions(versions, layout).select(
        F.struct(*layout.key_columns).alias(_LOOKUP_KEY), TS, TOMBSTONE, *layout.value_columns)
    joined = asof_join(probe, table, stream_key=_LOOKUP_KEY, stream_ts=as_of_column,
                       table_key=_LOOKUP_KEY, table_ts=TS, how=how,
                       table_value_cols=list(layout.value_columns),
                       history_retention_ms=layout.history_retention_ms,
                       table_stream_time=stream_time, tombstone_col=TOMBSTONE,
                       valid_from_col=VALID_FROM)
    return joined.drop(_LOOKUP_KEY)


# ---- Delta wrappers ---------------------------------------------------------------------------


def read_versions(spark: SparkSession, path: str, *, version: int | None = None) -> DataFrame:
    from joins.lake import read_delta

    return read_delta(spark, path, version=version)


def read_stream_time(spark: SparkSession, path: str, *, version: int | None = None) -> int | None:
    """Stream time persisted by the table itself (None when the table does not exist yet).

    From the Delta log's statistics (the largest `ts` of every file: a log read, where a scan
    would grow with the table every micro-batch); a scan only when a file has no statistics."""
    from joins.lake import read_delta, table_summary

    summary = table_summary(path, version=version, columns=[TS])
    if summary is None or summary.rows == 0:
        return None
    if TS in summary.max:
        return int(summary.max[TS])
    return stream_time_of(read_delta(spark, path, version=version, columns=[TS]))


def read_snapshot(spark: SparkSession, path: str, layout: VersionedDeltaLayout, as_of: int, *,
                  version: int | None = None) -> DataFrame:
    """`snapshot_as_of` of the Delta table at `path` (optionally at a past Delta version)."""
    versions = read_versions(spark, path, version=version)
    return snapshot_as_of(versions, layout, as_of, stream_time_of(versions))


def read_lookup_as_of(spark: SparkSession, path: str, layout: VersionedDeltaLayout,
                      pairs: DataFrame, *, pair_key_columns: list[str] | None = None,
                      as_of_column: str = "as_of", how: Literal["left", "inner"] = "left",
                      version: int | None = None) -> DataFrame:
    """`lookup_as_of` against the Delta table at `path`."""
    versions = read_versions(spark, path, version=version)
    return lookup_as_of(pairs, versions, layout, stream_time=stream_time_of(versions),
                        pair_key_columns=pair_key_columns, as_of_column=as_of_column, how=how)


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction did. `commit` is None when there was nothing to remove."""

    from_version: int
    rows_before: int
    rows_after: int
    stream_time: int | None
    commit: CommitInfo | None


def compact(spark: SparkSession, path: str, layout: VersionedDeltaLayout) -> CompactionReport:
    """Rewrite the versions table without superseded puts and unreachable history, as one
    overwrite commit. Reads are pinned to the current Delta version, so a compaction never mixes
    two versions of the table; a writer must not append concurrently (it would be overwritten:
    the table has one writer at a time, like a Kafka Streams task owns its store)."""
    from joins.lake import delta_version, read_delta, write_delta

    version = delta_version(path)
    if version is None:
        raise ConfigError(f"{OPERATOR}: no versioned table at {path} to compact")
    versions = read_delta(spark, path, version=version)
    stream_time = stream_time_of(versions)
    kept = compaction_plan(versions, layout, stream_time)
    rows_before = versions.count()
    kept = kept.persist()
    try:
        rows_after = kept.count()
        commit = None
        if rows_after != rows_before:
            commit = write_delta(kept, path, mode="overwrite", partition_by=list(PARTITION_BY),
                                 commit_message=f"compact versioned table (stream time {stream_time}, "
                                                f"history retention {layout.history_retention_ms} ms)")
    finally:
        kept.unpersist()
    return CompactionReport(from_version=version, rows_before=rows_before, rows_after=rows_after,
                            stream_time=stream_time, commit=commit)
