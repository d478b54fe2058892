"""Direct reads of the Delta transaction log (`_delta_log/`), for what delta-rs does not expose:
the actions of one commit (incremental reads) and every file path the log mentions (orphan
cleanup). Only JSON commits and classic Parquet checkpoints are understood; anything else is
refused by the callers rather than half-read.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from joins.lake.errors import LakeError, UnsupportedTableError
from joins.lake.location import DELTA_LOG, TableLocation
from joins.lake.model import AppTxn, CommitInfo, partitions_of

COMMIT_FILE = re.compile(r"^(\d{20})\.json$")   # a commit's file in _delta_log
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")
_V2_CHECKPOINT = re.compile(r"^\d{20}\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")


def commit_path(version: int) -> str:
    """The path of commit `version`'s file, relative to the table's root."""
    return f"{DELTA_LOG}/{version:020d}.json"


def commit_actions(loc: TableLocation, version: int) -> list[dict[str, Any]]:
    """The actions of commit `version`, in log order."""
    path = loc.fs_path(commit_path(version))
    try:
        with loc.fs.open_input_stream(path) as stream:
            text = stream.read().decode("utf-8")
    except FileNotFoundError as exc:
        raise LakeError(f"{loc}: the log entry of version {version} is gone (log retention "
                        "cleaned it up); cannot read the commits of that range") from exc
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def records_txn(loc: TableLocation, version: int, app_txn: AppTxn) -> bool:
    """Whether commit `version` carries `app_txn` (its `txn` action)."""
    return any(a.get("txn", {}).get("appId") == app_txn.app_id
               and a["txn"].get("version") == app_txn.version for a in commit_actions(loc, version))


def commit_info(loc: TableLocation, version: int, *, skipped: bool) -> CommitInfo:
    """What commit `version` added: its files, their rows (from the statistics) and partitions."""
    adds = [a["add"] for a in commit_actions(loc, version) if "add" in a]
    rows = sum(int(json.loads(a["stats"]).get("numRecords", 0)) for a in adds if a.get("stats"))
    return CommitInfo(version=version, skipped=skipped, files=len(adds), rows=rows,
                      partitions=partitions_of(a.get("partitionValues") or {} for a in adds))


def commit_time(loc: TableLocation, version: int) -> dt.datetime | None:
    """When `version` was committed: the earlier of the commitInfo timestamp and the log
    file's modification time (Delta's commit timestamp is the latter; writers set the former
    just before writing, so the two differ by milliseconds). None if the entry is gone."""
    path = loc.fs_path(commit_path(version))
    info = loc.fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return None
    times = []
    if info.mtime is not None:
        times.append(info.mtime if info.mtime.tzinfo else info.mtime.replace(tzinfo=dt.UTC))
    for action in commit_actions(loc, version):
        stamp = action.get("commitInfo", {}).get("timestamp")
        if isinstance(stamp, int):
            times.append(dt.datetime.fromtimestamp(stamp / 1000, dt.UTC))
    return min(times) if times else None


def _log_files(loc: TableLocation) -> list[pafs.FileInfo]:
    selector = pafs.FileSelector(loc.fs_path(DELTA_LOG), allow_not_found=True)
    return [i for i in loc.fs.get_file_info(selector) if i.type == pafs.FileType.File]


def referenced_paths(loc: TableLocation) -> set[str]:
    """Every data path (decoded, relative to the root) that any available commit or checkpoint
    adds, removes or records as change data. A file outside this set is an orphan: no table
    version, current or time-travelled, can see it."""
    paths: set[str] = set()

    def keep(raw: str | None) -> None:
        if raw:
            rel = loc.log_relative_path(raw)
            if rel is not None:
                paths.add(rel)

    for info in _log_files(loc):
        name = info.base_name
        if _V2_CHECKPOINT.match(name):
            raise UnsupportedTableError(f"{loc}: the table uses v2 checkpoints; orphan cleanup "
                                        "only understands classic checkpoints")
        if COMMIT_FILE.match(name):
            with loc.fs.open_input_stream(info.path) as stream:
                for line in stream.read().decode("utf-8").splitlines():
                    if not line.strip():
                        continue
                    action = json.loads(line)
                    for kind in ("add", "remove", "cdc"):
                        if kind in action:
                            keep(action[kind].get("path"))
        elif _CHECKPOINT.match(name):
            with loc.fs.open_input_file(info.path) as handle:
                parquet = pq.ParquetFile(handle)
                kinds = [k for k in ("add", "remove") if k in parquet.schema_arrow.names]
                table = parquet.read(columns=kinds)
            for kind in kinds:
                for entry in table.column(kind).to_pylist():
                    if entry is not None:
                        keep(entry.get("path"))
    return paths
