"""Which landing files a batch reads, in arrival order, which of them cannot be read at all, and
how Spark is told their exact names.

Only regular files are read. A symbolic link is never followed (it could point anywhere: a
system file's lines would land in the quarantine) and a directory, FIFO, socket or device is no
landing file; each is refused with a reason, and the ingest quarantines it as a whole file.

Spark's file sources treat a path as a glob pattern (`[ ] { } * ? \\` are special): a landed
`a*.jsonl` would also read `ab.jsonl`. Paths given to Spark are therefore escaped to match only
themselves, and local files are read through Hadoop's raw local file system (the checksumming
default cannot open a name with `:`, it builds a relative `.name.crc` path from it).
"""

from __future__ import annotations

import bz2
import gzip
import os
import stat
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import unquote, urlparse

from joins.errors import ConfigError
from joins.landing.read_failures import raise_if_store_failed
from joins.landing.spec import OPERATOR

if TYPE_CHECKING:
    import pyarrow.fs as pafs

_GLOB_CHARS = frozenset("[]{}*?\\")
# Reader options (merged into the read's Hadoop configuration) for local files.
RAW_LOCAL_OPTIONS = {"fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
                     "fs.file.impl.disable.cache": "true"}
# The longest line a reader of text files (CSV, JSON lines) holds. A record over
# max_record_bytes (at most 16 MiB) is quarantined on its own; a line past this length (a file of
# one endless line, binary data under a text name) would cost a task several copies of it in
# memory (a 300 MB JSON line took a 4 GB local session's JVM down): its file is refused whole.
MAX_LINE_BYTES = 64 * 2**20
# What a broken compressed stream raises: gzip's and bz2's OSError, a truncated stream's EOFError,
# corrupt deflate data's zlib.error.
READ_ERRORS = (OSError, EOFError, zlib.error)
_COMPRESSED = (".gz", ".bz2")


@dataclass(frozen=True)
class LandingFile:
    """A file of a batch: its path, and why it cannot be read (None: a regular file)."""

    path: str
    problem: str | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.path.rstrip("/"))


def is_remote(path: str) -> bool:
    return "://" in path


def _kind_of(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"


def file_problem(path: str) -> str | None:
    """Why `path` is no readable landing file (None: it is one). Never follows a link."""
    if is_remote(path):
        return _remote_problem(remote_infos([path])[path])
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "the file no longer exists (removed after it landed)"
    except OSError as exc:
        raise_if_store_failed(exc, path)   # a denied permission, a disk's I/O error: no verdict
        return f"cannot be examined: {exc.strerror or exc}"
    if stat.S_ISLNK(mode):
        return "a symbolic link: links are not followed, land the file itself"
    if not stat.S_ISREG(mode):
        return f"{_kind_of(mode)}, not a regular file"
    return None


def file_problems(paths: Sequence[str]) -> dict[str, str | None]:
    """`file_problem` of each path; objects in a store are asked about in one call per store."""
    infos = remote_infos([p for p in paths if is_remote(p)])
    return {p: _remote_problem(infos[p]) if is_remote(p) else file_problem(p) for p in paths}


def _remote_problem(info: pafs.FileInfo) -> str | None:
    import pyarrow.fs as pafs

    if info.type == pafs.FileType.NotFound:
        return "the file no longer exists (removed after it landed)"
    return None if info.type == pafs.FileType.File else "not a regular file (a directory)"


def remote_infos(paths: Sequence[str]) -> dict[str, pafs.FileInfo]:
    """Each object's file info: one file system and one call per store, not one of each per
    file (an object store's client resolves its credentials when made)."""
    import pyarrow.fs as pafs

    by_store: dict[str, list[str]] = {}
    for path in paths:
        scheme, _, rest = path.partition("://")
        by_store.setdefault(f"{scheme}://{rest.split('/', 1)[0]}", []).append(path)
    infos: dict[str, pafs.FileInfo] = {}
    for group in by_store.values():
        fs, prefix = _store_file_system(group)
        inner = [p[len(prefix):] if prefix is not None and p.startswith(prefix) and "%" not in p
                 and "?" not in p else pafs.FileSystem.from_uri(p)[1] for p in group]
        infos.update(zip(group, fs.get_file_info(inner), strict=True))
    return infos


def scan_folder(folder: str) -> list[LandingFile]:
    """The entries of a landing folder in arrival order (name order), each with its problem.
    Hidden and `_`-prefixed names are not landed yet (writers rename files into place; Spark
    and Delta write markers like `_SUCCESS`). A missing folder has no files."""
    if is_remote(folder):
        import pyarrow.fs as pafs

        fs, inner = pafs.FileSystem.from_uri(folder)
        infos = fs.get_file_info(pafs.FileSelector(inner, allow_not_found=True))
        base = folder.rstrip("/")
        entries = [LandingFile(f"{base}/{i.base_name}", None if i.type == pafs.FileType.File
                               else "not a regular file (a directory)") for i in infos
                   if not i.base_name.startswith((".", "_"))]
    else:
        if not os.path.isdir(folder):
            return []
        entries = [LandingFile(os.path.join(folder, name), file_problem(os.path.join(folder, name)))
                   for name in os.listdir(folder) if not name.startswith((".", "_"))]
    return sorted(entries, key=lambda f: (f.name, f.path))


def _names_no_file(uri: str) -> bool:
    """Whether a URI stands for a folder: it names no file (object stores have no folders to
    ask about; a missing one holds no files)."""
    import pyarrow.fs as pafs

    fs, inner = pafs.FileSystem.from_uri(uri)
    return fs.get_file_info(inner).type != pafs.FileType.File


def _store_file_system(uris: Sequence[str]) -> tuple[pafs.FileSystem, str | None]:
    """The file system of a store's URIs, and the part of a URI before the file system's own
    path (s3://, file://, hdfs://host:port), from the first URI that parses as one (a name
    with a space does not); a URI it does not end (a query, %-escapes) is parsed alone."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    for uri in uris:
        try:
            fs, inner = pafs.FileSystem.from_uri(uri)
        except pa.ArrowInvalid:
            continue
        return fs, uri[:-len(inner)] if inner and uri.endswith(inner) else None
    fs, _ = pafs.FileSystem.from_uri(uris[0])   # none parses: its error names the first
    return fs, None


def list_landing_files(files: str | Sequence[str]) -> list[LandingFile]:
    """The batch's files in arrival order: sorted by file name (then by full path). A directory
    given as `files` stands for its entries (see `scan_folder`); a named file that does not
    exist is an error of the caller."""
    if isinstance(files, str) and (_names_no_file(files) if is_remote(files) else os.path.isdir(files)):
        return scan_folder(files)
    paths = [files] if isinstance(files, str) else list(files)
    for path in paths:
        if not is_remote(path) and not os.path.lexists(path):
            raise ConfigError(f"{OPERATOR}: landing file {path!r} does not exist")
    listed = [LandingFile(path, problem) for path, problem in file_problems(paths).items()]
    return sorted(listed, key=lambda f: (f.name, f.path))


def open_landing_file(path: str, *, random_access: bool = False) -> BinaryIO:
    """Open a landing file for reading without following a symbolic link; anything but a
    regular file is refused (a FIFO swapped in since the listing would block the task).

    random_access: a file that can seek (a Parquet footer is read from the end). A local file
    always can; through a URI (an object store) a sequential stream reads in large requests,
    a random-access file in one request per read."""
    if "://" in path:
        import pyarrow.fs as pafs

        fs, inner = pafs.FileSystem.from_uri(path)
        if random_access:
            return fs.open_input_file(inner)  # type: ignore[return-value]
        # The bytes as they lie: pyarrow would otherwise decompress a `.gz` or `.bz2` by its name
        # here, and the readers decide that themselves, for local and remote files alike.
        return fs.open_input_stream(inner, compression=None)  # type: ignore[return-value]
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return os.fdopen(fd, "rb")


def is_compressed(path: str) -> bool:
    """Named as a compressed file: Spark's text reader and the CSV reader decompress it."""
    return path.lower().endswith(_COMPRESSED)


def decompressed(stream: BinaryIO, path: str) -> BinaryIO:
    """`stream` decompressed as its name says (streaming: memory holds one block)."""
    name = path.lower()
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[return-value]
    if name.endswith(".bz2"):
        return bz2.BZ2File(stream, mode="rb")  # type: ignore[return-value]
    return stream


def line_too_long(line: int, limit: int) -> str:
    """The problem of a file with a line over `limit` bytes (1-based `line`)."""
    return f"cannot be read: line {line} is longer than {limit} bytes, the longest line a reader holds"


def spark_path(path: str) -> str:
    """`path` as a Spark file source reads it: absolute, glob characters escaped."""
    if not is_remote(path):
        path = os.path.abspath(path)
    return "".join("\\" + ch if ch in _GLOB_CHARS else ch for ch in path)


def reader_options(paths: Sequence[str]) -> dict[str, str]:
    return RAW_LOCAL_OPTIONS if any(not is_remote(p) for p in paths) else {}


def _path_keys(path: str) -> list[str]:
    """Comparable forms of a path as given by a user or as Spark's `_metadata.file_path` spells
    it: `file:/tmp/a%20b.csv` for the local `/tmp/a b.csv`, but `file:/tmp/a*.csv` unescaped
    for a name Hadoop took from a glob match; both readings are tried."""
    if path.startswith("file:"):
        raw = urlparse(path).path
        return [os.path.normpath(unquote(raw)), os.path.normpath(raw)]
    if is_remote(path):
        return [path, unquote(path)]
    return [os.path.normpath(os.path.abspath(path))]


def display_names(spark_paths: Sequence[str], files: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Spark file path -> (position in arrival order, the path as the user gave it)."""
    by_key = {_path_keys(f)[0]: (i, f) for i, f in enumerate(files)}
    out: dict[str, tuple[int, str]] = {}
    for sp in spark_paths:
        found = next((by_key[k] for k in _path_keys(sp) if k in by_key), None)
        if found is None:
            raise ConfigError(f"{OPERATOR}: Spark read a file that was not listed: {sp}")
        out[sp] = found
    return out
