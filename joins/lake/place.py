"""Staged files into their place: each file's Delta statistics from its Parquet footer, then a
move from the write's staging prefix to `col=value/...` under the table root (a rename on local
and HDFS storage). Moved but uncommitted files are orphans no version references."""

from __future__ import annotations

import datetime as dt
import posixpath
from concurrent.futures import ThreadPoolExecutor

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from joins.lake import commit as _commit
from joins.lake.errors import LakeError
from joins.lake.finish import remove_quietly
from joins.lake.location import TableLocation
from joins.lake.schema import WritePlan, parse_partition_dirs
from joins.lake.stats import footer_stats

# Footer reads are small ranged reads, latency-bound on object stores.
_FOOTER_THREADS = 16


def place_files(loc: TableLocation, staging: str, plan: WritePlan) -> list[_commit.StagedFile]:
    """Stats from each staged file's footer, then the move to its final place. Empty files
    (Spark writes one for an empty unpartitioned input) are left behind in staging."""
    selector = pafs.FileSelector(loc.fs_path(staging), recursive=True, allow_not_found=True)
    staged = [info for info in loc.fs.get_file_info(selector)
              if info.type == pafs.FileType.File and info.base_name.endswith(".parquet")
              and not info.base_name.startswith((".", "_"))]
    if not staged:
        return []
    prefix = loc.fs_path(staging) + "/"

    def place(info: pafs.FileInfo) -> _commit.StagedFile | None:
        relative = info.path[len(prefix):]
        parsed = parse_partition_dirs(posixpath.dirname(relative))
        if parsed is None or [k for k, _ in parsed] != plan.partition_by:
            raise LakeError(f"{loc}: unexpected file {info.path} in the staging area of this "
                            "write")
        with loc.fs.open_input_file(info.path) as handle:
            metadata = pq.ParquetFile(handle).metadata
        if metadata.num_rows == 0:
            return None
        rows, stats = footer_stats(metadata, plan.schema)
        target = loc.fs_path(relative)
        if loc.fs.get_file_info(target).type != pafs.FileType.NotFound:
            raise LakeError(f"{loc}: {relative} already exists; refusing to overwrite it")
        parent = posixpath.dirname(target)
        if parent:
            loc.fs.create_dir(parent, recursive=True)
        loc.fs.move(info.path, target)
        mtime = info.mtime if info.mtime is not None else dt.datetime.now(dt.UTC)
        return _commit.StagedFile(
            path=relative, size=int(info.size or 0),
            modification_time=int(mtime.timestamp() * 1000),
            partition_values=dict(parsed), num_records=rows, stats=stats)

    with ThreadPoolExecutor(max_workers=min(_FOOTER_THREADS, len(staged))) as pool:
        futures = [pool.submit(place, info) for info in staged]
        placed = [f.result() for f in futures if f.exception() is None]
        failures = [f.exception() for f in futures if f.exception() is not None]
    done = [f for f in placed if f is not None]
    if failures:
        remove_quietly(loc, [f.path for f in done], None)
        raise failures[0]  # type: ignore[misc]
    return done


def check_replaced(loc: TableLocation, files: list[_commit.StagedFile],
                    replace: dict[str, set[str]]) -> None:
    for f in files:
        for column, allowed in replace.items():
            value = f.partition_values.get(column)
            if value not in allowed:
                remove_quietly(loc, [g.path for g in files], None)
                raise LakeError(
                    f"{loc}: the data has rows with {column}={value!r}, outside "
                    f"replace_partitions[{column!r}]={sorted(allowed)}; nothing was committed")
