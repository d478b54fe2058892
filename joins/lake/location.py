"""Where a table lives, seen by the three parties that touch it.

delta-rs wants a local path or a URI (`s3://bucket/t`); Spark (Hadoop) wants `s3a://` for S3;
pyarrow's filesystem layer (listing, moving, deleting, Parquet footers) wants a filesystem
object plus a path inside it. `TableLocation` derives all three from what the user passed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs

from joins.lake.errors import LakeError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# Hadoop names the S3 connector s3a; delta-rs and pyarrow call the same buckets s3.
_SPARK_SCHEMES = {"s3": "s3a"}

DELTA_LOG = "_delta_log"


@dataclass(frozen=True)
class TableLocation:
    """A table root: `uri` is an absolute local path (no scheme) or a URI with a scheme."""

    uri: str

    @classmethod
    def of(cls, path: str | os.PathLike[str] | TableLocation) -> TableLocation:
        if isinstance(path, TableLocation):
            return path
        text = os.fspath(path)
        if not text:
            raise LakeError("table path is empty")
        if text.startswith("file:"):
            text = unquote(urlparse(text).path)
        if _SCHEME.match(text) is None:
            return cls(os.path.abspath(text))
        return cls(text.rstrip("/"))

    @property
    def is_local(self) -> bool:
        return _SCHEME.match(self.uri) is None

    @property
    def delta_uri(self) -> str:
        return self.uri

    def spark_path(self, relative: str = "") -> str:
        """The path Spark should use for `relative` (decoded, '/'-separated) under the root."""
        base = self.uri
        if not self.is_local:
            scheme, rest = base.split(":", 1)
            base = _SPARK_SCHEMES.get(scheme.lower(), scheme) + ":" + rest
        return f"{base}/{relative}" if relative else base

    @cached_property
    def _fs_and_root(self) -> tuple[pafs.FileSystem, str]:
        if self.is_local:
            return pafs.LocalFileSystem(), self.uri
        try:
            fs, root = pafs.FileSystem.from_uri(self.uri)
        except Exception as exc:  # pyarrow raises ArrowInvalid / ValueError per scheme
            raise LakeError(f"{self.uri}: no filesystem for this URI: {exc}") from exc
        return fs, root.rstrip("/")

    @property
    def fs(self) -> pafs.FileSystem:
        return self._fs_and_root[0]

    def fs_path(self, relative: str = "") -> str:
        """Path inside `fs` for `relative` under the root."""
        root = self._fs_and_root[1]
        return f"{root}/{relative}" if relative else root

    def relative(self, fs_path: str) -> str:
        """Inverse of `fs_path`."""
        root = self._fs_and_root[1] + "/"
        if not fs_path.startswith(root):
            raise LakeError(f"{self.uri}: {fs_path} is not inside the table")
        return fs_path[len(root):]

    def log_relative_path(self, log_path: str) -> str | None:
        """A file path as the Delta log stores it (URL-encoded, relative or absolute URI)
        turned into a decoded path relative to the root; None if it points outside."""
        decoded = unquote(log_path)
        if _SCHEME.match(log_path) is None:
            return decoded
        absolute = TableLocation.of(decoded).uri
        prefix = self.uri.rstrip("/") + "/"
        return absolute[len(prefix):] if absolute.startswith(prefix) else None

    def __str__(self) -> str:
        return self.uri
