"""One CSV landing file, record by record, with Python's csv module: the parser that defines the
format most CSV files are written with (quoted fields holding the delimiter, doubled quotes and
newlines; `\\r\\n` or `\\n` line ends). Runs inside Spark tasks (`joins.landing.csv_records`),
one file per task, streaming: memory holds one record at a time.

Each record comes with the line it starts on (the row number every complaint names), its raw
text and, for a record that cannot be split into fields, the reason:

- larger than `max_record_bytes`;
- not valid UTF-8 (bytes are decoded with `surrogateescape`, so an invalid byte is seen, never
  replaced by U+FFFD unnoticed; the quarantined text shows U+FFFD in its place);
- malformed CSV (`strict` parsing: text after a closing quote, a quoted field never closed;
  a quote inside an unquoted field is a character of the field, as Python reads it).

A file named `*.gz` or `*.bz2` is decompressed as it is read (gzip, bzip2: what Spark's text
reader opens for JSON-lines files too). A file that cannot be opened or read through (a broken
or truncated compressed file, or a line longer than `files.MAX_LINE_BYTES`) is reported once, with
index -1.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from joins.landing.files import (
    MAX_LINE_BYTES,
    READ_ERRORS,
    decompressed,
    line_too_long,
    open_landing_file,
)
from joins.landing.read_failures import damaged_stream, read_error_text, store_failed

FILE_PROBLEM_INDEX = -1
READ_FAILED_INDEX = -2   # the read failed, not the file: one row, its reason
_INVALID_UTF8 = re.compile("[\udc80-\udcff]")
_SHOWN_CHARS = 1000


class _LineTooLong(Exception):
    """A physical line longer than the parser reads (its 1-based number)."""


@dataclass(frozen=True)
class CsvRecord:
    index: int                      # 0-based among the file's records (blank lines skipped)
    row: int | None                 # 1-based line the record starts on
    raw: str | None                 # the record's text, valid UTF-8, without its line end
    fields: list[str | None] | None  # None when the record could not be split
    problem: str | None


def _utf8_problem(raw: str) -> str | None:
    bad = _INVALID_UTF8.search(raw)
    if bad is None:
        return None
    offset = len(raw[:bad.start()].encode("utf-8", "surrogateescape"))
    byte = ord(bad.group()) - 0xDC00
    return f"not valid UTF-8 (byte 0x{byte:02x} at byte {offset} of the record)"


def _shown(raw: str, size: int, max_bytes: int) -> str:
    text = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith(("\n", "\r")) else text
    if size > max_bytes:
        return f"{text[:_SHOWN_CHARS]}... ({size} bytes)"
    return text


def parse_csv(stream: BinaryIO, *, delimiter: str, max_record_bytes: int,
              max_line_chars: int = MAX_LINE_BYTES) -> Iterator[CsvRecord]:
    """The records of one CSV file (see the module doc). Raises `_LineTooLong` at a line longer
    than `max_line_chars` (`files.MAX_LINE_BYTES`: a record over max_record_bytes is still read
    through to find where it ends, so the records after it are split where the writer meant;
    a longer line is not held in a task's memory)."""
    # utf-8-sig drops a leading byte order mark (spreadsheet exports write one), as Spark's text
    # reader does for JSON lines.
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")
    consumed: list[str] = []

    def lines() -> Iterator[str]:
        number = 0
        while line := text.readline(max_line_chars):
            number += 1
            if len(line) >= max_line_chars and not line.endswith(("\n", "\r")):
                # Characters are at least a byte each: the line is at least this many bytes.
                raise _LineTooLong(number)
            consumed.append(line)
            yield line

    # The field limit stops building a huge field early (an over-long field always makes an
    # over-long record, whose size is the reason given below).
    csv.field_size_limit(max_record_bytes)
    reader = csv.reader(lines(), delimiter=delimiter, strict=True)
    index = 0
    while True:
        start = reader.line_num + 1
        fields: list[str] | None
        try:
            fields, problem = next(reader), None
        except StopIteration:
            return
        except csv.Error as exc:
            fields, problem = None, f"malformed CSV: {exc}"
        raw = "".join(consumed)
        consumed.clear()
        if fields is not None and not raw.strip():
            continue  # a blank line holds no record; the lines keep their numbers
        size = len(raw.rstrip("\r\n").encode("utf-8", "surrogateescape"))
        if size > max_record_bytes:
            problem = f"record too large: {size} bytes, over max_record_bytes ({max_record_bytes})"
        problem = problem or _utf8_problem(raw)
        cells = None if problem else [f if f != "" else None for f in fields or []]
        yield CsvRecord(index, start, _shown(raw, size, max_record_bytes), cells, problem)
        index += 1


def read_csv_file(path: str, *, delimiter: str, max_record_bytes: int,
                  max_line_chars: int = MAX_LINE_BYTES) -> Iterator[CsvRecord]:
    """`parse_csv` of the file at `path`; an unreadable file gives one record with index -1.
    Records already yielded before a read error are then void: the whole file is refused."""
    try:
        with open_landing_file(path) as raw, decompressed(raw, path) as stream:
            yield from parse_csv(stream, delimiter=delimiter, max_record_bytes=max_record_bytes,
                                 max_line_chars=max_line_chars)
    except _LineTooLong as exc:
        yield CsvRecord(FILE_PROBLEM_INDEX, None, None, None, line_too_long(exc.args[0], max_line_chars))
    except READ_ERRORS as exc:
        if store_failed(exc):   # not the file's content: the driver raises it (read_failures)
            yield CsvRecord(READ_FAILED_INDEX, None, None, None, read_error_text(exc))
            return
        yield CsvRecord(FILE_PROBLEM_INDEX, None, None, None, damaged_stream(exc))
