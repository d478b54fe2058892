"""JSON-lines files with a line too long to read, found before Spark's text reader holds one.

Spark's text reader keeps a whole line in the task's memory, several times over (the line, its
string, the persisted copy the numbering reads twice): a JSON-lines file of one 300 MB line took
a 4 GB local session's JVM down, and with it the run that read it. Hadoop's own line limit
(`mapreduce.input.linerecordreader.line.maxlength`) skips such a line silently and shifts every
later row number, so it is no answer. Instead each file that could hold a line over
`MAX_LINE_BYTES` (one larger than that, or compressed: a small `.gz` can hold a long line) is
scanned first in a Spark task, in blocks, never holding a line; a file with such a line is
refused whole (`bad_file`), as the CSV reader refuses one. Most landing files are smaller than
the limit and plain: no file is opened and no job runs for them.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins.landing.files import (
    MAX_LINE_BYTES,
    READ_ERRORS,
    decompressed,
    is_compressed,
    is_remote,
    line_too_long,
    open_landing_file,
    remote_infos,
)
from joins.landing.per_file import refused_files
from joins.landing.read_failures import damaged_stream, raise_if_store_failed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_BLOCK = 1 << 20
# Line ends as Spark's text reader (Hadoop's LineRecordReader) splits them: \n, \r\n, a lone \r.
_LINE_END = re.compile(rb"\r\n|\r|\n")


def long_line_problem(path: str, max_line_bytes: int = MAX_LINE_BYTES) -> str | None:
    """Why the file at `path` cannot be read as lines (a line over `max_line_bytes`, or a
    compressed stream that breaks), or None. Memory holds one block."""
    try:
        with open_landing_file(path) as raw, decompressed(raw, path) as stream:
            line, run, carry = 1, 0, b""
            while block := stream.read(_BLOCK):
                block = carry + block
                # A \r ending the block may be the first half of \r\n: decided with the next block.
                carry = b"\r" if block.endswith(b"\r") else b""
                block = block[:len(block) - len(carry)]
                start = 0
                for end in _LINE_END.finditer(block):
                    if run + end.start() - start > max_line_bytes:
                        return line_too_long(line, max_line_bytes)
                    line, run, start = line + 1, 0, end.end()
                run += len(block) - start
                if run > max_line_bytes:
                    return line_too_long(line, max_line_bytes)
    except READ_ERRORS as exc:
        raise_if_store_failed(exc, path)
        return damaged_stream(exc)
    return None


def _may_hold_a_long_line(paths: Sequence[str], max_line_bytes: int) -> list[str]:
    """The files a line over `max_line_bytes` could be in: compressed or larger than it."""
    out = [p for p in paths if is_compressed(p)]
    for path in paths:
        if is_compressed(path) or is_remote(path):
            continue
        try:
            if os.lstat(path).st_size > max_line_bytes:
                out.append(path)
        except OSError:
            out.append(path)   # gone since the listing: the scan says so, as a bad file
    remote = [p for p in paths if not is_compressed(p) and is_remote(p)]
    if remote:
        from pyarrow.fs import FileType

        # Gone, or no file: the scan says so, as a bad file.
        infos = remote_infos(remote)
        out.extend(p for p in remote
                   if infos[p].type != FileType.File or infos[p].size > max_line_bytes)
    return out


def files_with_long_lines(spark: SparkSession, paths: Sequence[str],
                          max_line_bytes: int | None = None) -> list[tuple[str, str]]:
    """(path, problem) of the files of `paths` that cannot be read as lines, in `paths` order;
    a Spark job (one file a task) only when some file may hold a long line. `max_line_bytes`:
    MAX_LINE_BYTES unless given."""
    max_line_bytes = MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    suspects = _may_hold_a_long_line(paths, max_line_bytes)
    problems = refused_files(spark, [(p,) for p in suspects], "path string",
                             functools.partial(long_line_problem, max_line_bytes=max_line_bytes))
    return [(p, problems[p]) for p in paths if p in problems]
