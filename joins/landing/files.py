"""Which landing files a batch reads, in arrival order, and how Spark names them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from urllib.parse import unquote, urlparse

from joins.errors import ConfigError
from joins.landing.spec import OPERATOR


def list_landing_files(files: str | Sequence[str]) -> list[str]:
    """The batch's files in arrival order: sorted by file name (then by full path).

    A directory (local) stands for its files, hidden and `_`-prefixed ones excepted (Spark and
    Delta write markers like `_SUCCESS`)."""
    paths = [files] if isinstance(files, str) else list(files)
    listed: list[str] = []
    for path in paths:
        if "://" not in path and os.path.isdir(path):
            listed += [os.path.join(path, name) for name in os.listdir(path)
                       if not name.startswith((".", "_"))
                       and os.path.isfile(os.path.join(path, name))]
        elif "://" not in path and not os.path.exists(path):
            raise ConfigError(f"{OPERATOR}: landing file {path!r} does not exist")
        else:
            listed.append(path)
    ordered = sorted(set(listed), key=lambda p: (os.path.basename(p.rstrip("/")), p))
    return ordered


def spark_path_key(path: str) -> str:
    """A comparable form of a path as given by a user or as Spark's `_metadata.file_path` spells
    it (`file:/tmp/a%20b.csv` for the local `/tmp/a b.csv`)."""
    if path.startswith("file:"):
        return os.path.normpath(unquote(urlparse(path).path))
    if "://" in path:
        return path
    return os.path.normpath(os.path.abspath(path))


def display_names(spark_paths: Sequence[str], files: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Spark file path -> (position in arrival order, the path as the user gave it)."""
    by_key = {spark_path_key(f): (i, f) for i, f in enumerate(files)}
    out: dict[str, tuple[int, str]] = {}
    for sp in spark_paths:
        found = by_key.get(spark_path_key(sp))
        if found is None:
            raise ConfigError(f"{OPERATOR}: Spark read a file that was not listed: {sp}")
        out[sp] = found
    return out
