"""Removal of orphan files: files in the table directory that no commit references.

A write that dies between writing its files and committing leaves such files (this project's
earlier writer staged them under `_staging/`). They are invisible to readers, so this is
storage hygiene, not correctness. Unlike Delta's VACUUM this never touches files an older
version still needs: files removed by a commit but referenced by the log stay, so time travel
keeps working.
"""

from __future__ import annotations

import datetime as dt
import os
import posixpath

import pyarrow.fs as pafs

from joins.lake.errors import LakeError
from joins.lake.location import DELTA_LOG, TableLocation
from joins.lake.log import referenced_paths
from joins.lake.table import open_snapshot


def vacuum_orphans(path: str | os.PathLike[str], *, older_than: dt.timedelta = dt.timedelta(hours=1),
                   dry_run: bool = False) -> list[str]:
    """Delete (or with dry_run only list) files under the table root that no commit or
    checkpoint references and that were last modified more than `older_than` ago. Returns
    their paths relative to the root, sorted.

    `older_than` protects writes in flight: it must exceed the longest write (from the Spark
    job's first file to its commit), or a running write loses its files.
    """
    loc = TableLocation.of(path)
    if not isinstance(older_than, dt.timedelta) or older_than < dt.timedelta(0):
        raise LakeError(f"{loc}: older_than must be a non-negative timedelta, got {older_than!r}")
    snap = open_snapshot(loc)
    assert snap is not None
    snap.check_readable()  # deletion-vector files and the like are referenced in other ways
    referenced = referenced_paths(loc)
    cutoff = dt.datetime.now(dt.UTC) - older_than
    selector = pafs.FileSelector(loc.fs_path(), recursive=True)
    infos = [i for i in loc.fs.get_file_info(selector) if i.type == pafs.FileType.File]
    orphans: list[str] = []
    for info in infos:
        rel = loc.relative(info.path)
        if rel == DELTA_LOG or rel.startswith(DELTA_LOG + "/"):
            continue
        if _companion_of(rel) in referenced or rel in referenced:
            continue
        mtime = info.mtime
        if mtime is not None:
            mtime = mtime if mtime.tzinfo else mtime.replace(tzinfo=dt.UTC)
            if mtime > cutoff:
                continue
        orphans.append(rel)
    orphans.sort()
    if not dry_run:
        for rel in orphans:
            loc.fs.delete_file(loc.fs_path(rel))
        _prune_empty_dirs(loc, {posixpath.dirname(rel) for rel in orphans})
    return orphans


def _companion_of(rel: str) -> str:
    """The data file a Hadoop checksum file `.name.crc` belongs to (itself otherwise)."""
    head, name = posixpath.split(rel)
    if name.startswith(".") and name.endswith(".crc"):
        return posixpath.join(head, name[1:-4])
    return rel


def _prune_empty_dirs(loc: TableLocation, dirs: set[str]) -> None:
    """Remove directories the deletion emptied, deepest first, up to (not including) the
    root."""
    candidates: set[str] = set()
    for d in dirs:
        while d and d != DELTA_LOG:
            candidates.add(d)
            d = posixpath.dirname(d)
    for d in sorted(candidates, key=lambda p: p.count("/"), reverse=True):
        selector = pafs.FileSelector(loc.fs_path(d), allow_not_found=True)
        try:
            if not loc.fs.get_file_info(selector):
                loc.fs.delete_dir(loc.fs_path(d))
        except OSError:
            continue
