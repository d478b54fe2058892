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
from joins.lake.read import scan_files
from joins.lake.schema import parse_partition_value
from joins.lake.table import Snapshot, open_snapshot

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


def _range(loc: TableLocation, from_version: int, to_version: int | None) -> tuple[Snapshot, int]:
    latest = open_snapshot(loc)
    assert latest is not None
    end = latest.version if to_version is None else to_version
    for name, value in (("from_version", from_version), ("to_version", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise LakeError(f"{loc}: {name} must be an integer, got {value!r}")
    if not -1 <= from_version <= end:
        raise LakeError(f"{loc}: need -1 <= from_version <= to_version, got "
                        f"from_version={from_version}, to_version={end}")
    if end > latest.version:
        raise LakeError(f"{loc}: to_version {end} does not exist (latest is {latest.version})")
    snap = latest if end == latest.version else open_snapshot(loc, version=end)
    assert snap is not None
    snap.check_readable()
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


def read_changes(spark: SparkSession, path: str | os.PathLike[str], from_version: int,
                 to_version: int | None = None) -> DataFrame:
    """The rows added by the commits in (from_version, to_version] (to_version: latest), with
    the schema of `to_version`. `from_version=-1` starts before the first commit."""
    loc = TableLocation.of(path)
    snap, end = _range(loc, from_version, to_version)
    files = added_files(loc, snap, from_version, end)
    return scan_files(spark, loc, snap.schema, snap.partition_by, [f.entry for f in files], None)


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
    unknown: set[str] = set()
    for f in files:
        stats = f.stats or {}
        count = stats.get("numRecords")
        rows = None if rows is None or count is None else rows + int(count)
        if count == 0:
            continue
        mins = dict(stats.get("minValues") or {})
        maxs = dict(stats.get("maxValues") or {})
        for column, value in f.entry.partition_values.items():
            mins[column] = maxs[column] = value
        for column in snap.schema.fieldNames():
            if column not in mins or column not in maxs:
                unknown.add(column)
                continue
            lo, hi = mins[column], maxs[column]
            if column not in lows or (lo is not None and (lows[column] is None or lo < lows[column])):
                lows[column] = lo
            if column not in highs or (hi is not None and (highs[column] is None or hi > highs[column])):
                highs[column] = hi
    for column in unknown:
        lows.pop(column, None)
        highs.pop(column, None)
    return ChangeStats(rows=rows, files=len(files), min=lows, max=highs)
