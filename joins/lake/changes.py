"""Incremental reads: the rows a range of commits added, and what their file statistics say.

A micro-batch consumes the commits (from_version, to_version] of each input. `read_changes`
reads their rows; `change_stats` answers "how many rows, and the min/max of a column" from the
add actions' statistics alone, without a Spark job (a micro-batch is a user waiting).

A range holding a commit that removed data (an overwrite, delete or update) is refused by both:
the rows it dropped would silently stay in "the rows added", so that would not be a changelog.
Compaction commits (dataChange=false) add no new rows and are skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins.lake.errors import LakeError, UnsupportedTableError
from joins.lake.location import TableLocation
from joins.lake.log import commit_actions
from joins.lake.model import FileEntry
from joins.lake.read import ORIGIN_FILE, ORIGIN_ROW, scan_files, stripped_path
from joins.lake.schema import parse_partition_value
from joins.lake.table import Snapshot, open_snapshot
from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class AddedFile:
    entry: FileEntry
    version: int
    stats: dict[str, Any] | None


@dataclass(frozen=True)
class ChangeStats:
    """Rows added by a range of commits, and per column the min / max over those rows. A
    column is absent from `min`/`max` when some file has no statistics for it (never a guess)."""

    rows: int | None
    files: int
    min: dict[str, Any] = field(default_factory=dict)
    max: dict[str, Any] = field(default_factory=dict)
    # Null values per column; absent when some file has no null count for it.
    nulls: dict[str, int] = field(default_factory=dict)


def _range(loc: TableLocation, from_version: int, to_version: int | None) -> tuple[Snapshot, int]:
    snap, end = version_range(loc, from_version, to_version)
    snap.check_readable()
    return snap, end


def version_range(loc: TableLocation, from_version: int,
                  to_version: int | None) -> tuple[Snapshot, int]:
    """The snapshot at the end of the range (from_version, to_version] and its version, the
    bounds checked (to_version None: the latest)."""
    for name, value in (("from_version", from_version), ("to_version", to_version)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise LakeError(f"{loc}: {name} must be an integer, got {value!r}")
    if to_version is not None and not -1 <= from_version <= to_version:
        raise LakeError(f"{loc}: need -1 <= from_version <= to_version, got "
                        f"from_version={from_version}, to_version={to_version}")
    # A pinned end is opened as such (the log replayed once, up to it).
    snap = open_snapshot(loc, version=to_version)
    assert snap is not None
    end = snap.version
    if not -1 <= from_version <= end:
        raise LakeError(f"{loc}: need -1 <= from_version <= to_version, got "
                        f"from_version={from_version}, to_version={end}")
    return snap, end


def added_files(loc: TableLocation, snap: Snapshot, from_version: int, end: int) -> list[AddedFile]:
    """The data files added by the commits in (from_version, end], in commit order."""
    schema, parts = snap.schema, snap.partition_by
    out: list[AddedFile] = []
    for version in range(from_version + 1, end + 1):
        for action in commit_actions(loc, version):
            removed = action.get("remove")
            if removed is not None and removed.get("dataChange", True):
                raise LakeError(
                    f"{loc}: version {version} removed data files (overwrite, delete or update), "
                    f"so the rows added in ({from_version}, {end}] are not a changelog; read the "
                    "snapshot with read_delta instead")
            added = action.get("add")
            if added is None or not added.get("dataChange", True):
                continue
            if added.get("deletionVector"):
                raise UnsupportedTableError(f"{loc}: version {version} adds a file with a "
                                            "deletion vector; this reader refuses those")
            rel = loc.log_relative_path(added["path"])
            if rel is None:
                raise UnsupportedTableError(f"{loc}: file {added['path']} lives outside the "
                                            "table root")
            raw_values = added.get("partitionValues") or {}
            values = {p: parse_partition_value(schema[p].dataType, raw_values.get(p)) for p in parts}
            stats = json.loads(added["stats"]) if added.get("stats") else None
            out.append(AddedFile(FileEntry(rel, values, added.get("size")), version, stats))
    return out


# Arrival order of a commit's rows: version, file's place in its commit, row in its file.
_VERSION_SHIFT, _FILE_SHIFT = 40, 24
MAX_ROWS_PER_FILE = 1 << _FILE_SHIFT
MAX_FILES_PER_COMMIT = 1 << (_VERSION_SHIFT - _FILE_SHIFT)


def read_changes(spark: SparkSession, path: str | os.PathLike[str], from_version: int,
                 to_version: int | None = None, *, arrival_column: str | None = None) -> DataFrame:
    """The rows added by the commits in (from_version, to_version] (to_version: latest), with
    the schema of `to_version`. `from_version=-1` starts before the first commit.

    `arrival_column` adds each row's place in the table's history as a long: (commit version,
    the file's place in its commit, the row's place in its file), packed so that sorting by it
    is commit order. For tables that carry no arrival order of their own."""
    loc = TableLocation.of(path)
    snap, end = _range(loc, from_version, to_version)
    files = added_files(loc, snap, from_version, end)
    entries = [f.entry for f in files]
    if arrival_column is None:
        return scan_files(spark, loc, snap.schema, snap.partition_by, entries, None)
    return _with_arrival(spark, loc, snap, files, arrival_column)


def _with_arrival(spark: SparkSession, loc: TableLocation, snap: Snapshot, files: list[AddedFile],
                  column: str) -> DataFrame:
    from pyspark.sql import functions as F

    frame = scan_files(spark, loc, snap.schema, snap.partition_by, [f.entry for f in files], None,
                       origin=True)
    places: list[tuple[str, int]] = []
    in_commit: dict[int, int] = {}
    for f in files:
        ordinal = in_commit.get(f.version, 0)
        in_commit[f.version] = ordinal + 1
        if ordinal >= MAX_FILES_PER_COMMIT:
            raise LakeError(f"{loc}: version {f.version} adds more than {MAX_FILES_PER_COMMIT} "
                            "files; their arrival order cannot be packed into one long")
        places.append((stripped_path(loc.spark_path(f.entry.path)),
                       (f.version << _VERSION_SHIFT) | (ordinal << _FILE_SHIFT)))
    base = local_rows(spark, places or [("", 0)], f"{ORIGIN_FILE} string, _tj_base long")
    too_long = F.raise_error(F.lit(f"{loc}: a file holds more than {MAX_ROWS_PER_FILE} rows; "
                                   "their arrival order cannot be packed into one long"))
    unknown = F.raise_error(F.concat(F.lit(f"{loc}: no commit adds the file "), F.col(ORIGIN_FILE)))
    row = (F.when(F.col("_tj_base").isNull(), unknown)
           .when(F.col(ORIGIN_ROW) >= MAX_ROWS_PER_FILE, too_long).otherwise(F.col(ORIGIN_ROW)))
    return (frame.join(F.broadcast(base), ORIGIN_FILE, "left")
            .withColumn(column, F.col("_tj_base") + row)
            .drop(ORIGIN_FILE, ORIGIN_ROW, "_tj_base"))


def change_stats(path: str | os.PathLike[str], from_version: int,
                 to_version: int | None = None) -> ChangeStats:
    """Rows and per-column bounds of the rows the commits in (from_version, to_version] added,
    from the add actions' statistics (partition columns from the partition values)."""
    loc = TableLocation.of(path)
    snap, end = _range(loc, from_version, to_version)
    files = added_files(loc, snap, from_version, end)
    rows: int | None = 0
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    unknown: set[str] = set()
    no_nulls_known: set[str] = set()
    for f in files:
        stats = f.stats or {}
        count = stats.get("numRecords")
        rows = None if rows is None or count is None else rows + int(count)
        if count == 0:
            continue
        mins = dict(stats.get("minValues") or {})
        maxs = dict(stats.get("maxValues") or {})
        null_counts = dict(stats.get("nullCount") or {})
        for column, value in f.entry.partition_values.items():
            mins[column] = maxs[column] = value
            if value is not None or count is not None:
                null_counts[column] = 0 if value is not None else int(count)
            else:
                null_counts.pop(column, None)
        for column in snap.schema.fieldNames():
            counted = null_counts.get(column)
            if isinstance(counted, int) and not isinstance(counted, bool):
                nulls[column] = nulls.get(column, 0) + counted
            else:
                no_nulls_known.add(column)  # a struct's counts are nested: not summed here
            if column not in mins or column not in maxs:
                unknown.add(column)
                continue
            lo, hi = mins[column], maxs[column]
            if isinstance(lo, dict) or isinstance(hi, dict):
                # delta-spark writes a struct's bounds per field; they are not summed here.
                unknown.add(column)
                continue
            if column not in lows or (lo is not None and (lows[column] is None or lo < lows[column])):
                lows[column] = lo
            if column not in highs or (hi is not None and (highs[column] is None or hi > highs[column])):
                highs[column] = hi
    for column in unknown:
        lows.pop(column, None)
        highs.pop(column, None)
    for column in no_nulls_known:
        nulls.pop(column, None)
    return ChangeStats(rows=rows, files=len(files), min=lows, max=highs, nulls=nulls)
