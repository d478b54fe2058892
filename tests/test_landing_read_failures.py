"""A read that fails because the store or the machine did is raised; one that fails because of
the file's bytes refuses the file (joins/landing/read_failures.py). No Spark here; the driver's
side of the task paths is tests/spark/test_landing_read_failures.py."""

from __future__ import annotations

import errno
import gzip
import re
import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from joins.landing import csv_parse, long_lines, parquet, parquet_values
from joins.landing.csv_parse import FILE_PROBLEM_INDEX, READ_FAILED_INDEX, read_csv_file
from joins.landing.parquet import footer_problem
from joins.landing.parquet_values import Suspect, row_problem
from joins.landing.read_failures import LandingReadError, store_failed

S3_DOWN = ("When reading information for key 'in/a.parquet' in bucket 'landing': AWS Error "
           "NETWORK_CONNECTION during HeadObject operation: curlCode: 7, Couldn't connect to server")


class Py4JLike(Exception):
    """A JVM error as PySpark shows it: py4j's line, the JVM's message, frames, causes."""


def jvm_error(cause: str) -> Py4JLike:
    return Py4JLike("An error occurred while calling o41.collectToPython.\n"
                    ": org.apache.spark.SparkException: Job aborted due to stage failure\n"
                    "\tat java.net.URI.<init>(URI.java:600)\n"
                    f"Caused by: {cause}\n\tat org.apache.parquet.Foo.bar(Foo.java:1)")


@pytest.mark.parametrize("exc", [
    ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
    TimeoutError("timed out"),
    PermissionError(errno.EACCES, "Permission denied"),
    OSError(errno.EIO, "Input/output error"),
    OSError(S3_DOWN),
    jvm_error("java.net.SocketTimeoutException: Read timed out"),
    jvm_error("java.nio.file.AccessDeniedException: /landing/a.parquet"),
], ids=lambda e: type(e).__name__ + ":" + str(e)[-40:])
def test_the_store_failing_is_not_the_files_fault(exc: BaseException) -> None:
    assert store_failed(exc)


@pytest.mark.parametrize("exc", [
    OSError("Couldn't deserialize thrift: TProtocolException: Invalid data"),  # pyarrow's footer
    pa.ArrowInvalid("Parquet magic bytes not found in footer."),
    gzip.BadGzipFile("Not a gzipped file (b'he')"),
    OSError("Invalid data stream"),                                            # bz2's damage
    EOFError("Compressed file ended before the end-of-stream marker was reached"),
    zlib.error("Error -3 while decompressing data: invalid block type"),
    FileNotFoundError(errno.ENOENT, "No such file or directory"),            # removed meanwhile
    OSError("/landing/p is not a regular file"),                              # open_landing_file
    # A frame naming java.net.URI is no network error: only the message and causes count.
    jvm_error("org.apache.parquet.io.ParquetDecodingException: Can not read value at 0"),
], ids=lambda e: type(e).__name__ + ":" + str(e)[-40:])
def test_damaged_bytes_are_the_files_fault(exc: BaseException) -> None:
    assert not store_failed(exc)


def parquet_file(path: Path) -> str:
    pq.write_table(pa.table({"k": ["x" * 100] * 50, "ts": list(range(50))}), path, row_group_size=10)
    return str(path)


def test_a_footer_that_does_not_deserialize_is_refused(tmp_path: Path) -> None:
    path = parquet_file(tmp_path / "a.parquet")
    data = bytearray(Path(path).read_bytes())
    length = struct.unpack("<i", data[-8:-4])[0]
    start = len(data) - 8 - length
    data[start:start + 3] = b"\xff\xff\xff"   # pyarrow: OSError "Couldn't deserialize thrift"
    Path(path).write_bytes(bytes(data))
    problem = footer_problem(path)
    assert problem is not None and problem.startswith("not a readable Parquet file: ")
    assert "thrift" in problem


@pytest.mark.parametrize("exc", [ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
                                 OSError(S3_DOWN), OSError(errno.EIO, "Input/output error")],
                         ids=["reset", "s3", "eio"])
def test_a_footer_read_the_store_failed_is_raised_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    path = parquet_file(tmp_path / "a.parquet")

    def failing(*args: object, **kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(parquet, "open_landing_file", failing)
    said = rf"^{re.escape(path)}: reading the file failed .* not quarantined"
    with pytest.raises(LandingReadError, match=said):
        footer_problem(path)


def test_a_row_check_the_store_failed_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    path = parquet_file(tmp_path / "a.parquet")
    suspect = Suspect(path, (0,), ("k",))
    assert row_problem(suspect, 10) is not None   # the check reads: a 100-byte row over 10

    def failing(*args: object, **kwargs: object) -> None:
        raise TimeoutError("timed out")

    monkeypatch.setattr(parquet_values, "open_landing_file", failing)
    with pytest.raises(LandingReadError, match=r"a\.parquet: reading the file failed"):
        row_problem(suspect, 10)


def test_a_csv_read_the_store_failed_is_one_record_for_the_driver(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(gzip.compress(b"k,ts\na,1\n" * 100)[:-30])
    damaged = list(read_csv_file(str(broken), delimiter=",", max_record_bytes=1000))
    assert damaged[-1].index == FILE_PROBLEM_INDEX      # the bytes: the file is refused

    def failing(*args: object, **kwargs: object) -> None:
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    monkeypatch.setattr(csv_parse, "open_landing_file", failing)
    got = list(read_csv_file(str(tmp_path / "a.csv"), delimiter=",", max_record_bytes=1000))
    reset = "[Errno 104] Connection reset by peer"
    assert [(r.index, r.problem) for r in got] == [(READ_FAILED_INDEX, reset)]


def test_a_line_check_the_store_failed_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    damaged = tmp_path / "a.jsonl.bz2"
    damaged.write_bytes(b"BZh9 not bzip2 at all")   # bz2's OSError "Invalid data stream"
    problem = long_lines.long_line_problem(str(damaged))
    assert problem is not None and problem.startswith("cannot be read")

    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(long_lines, "open_landing_file", failing)
    with pytest.raises(LandingReadError, match=r"a\.jsonl\.bz2: reading the file failed"):
        long_lines.long_line_problem(str(damaged))


def test_a_file_the_planner_may_not_examine_is_raised_one_removed_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from joins.landing import files

    gone = str(tmp_path / "gone.jsonl")
    assert files.file_problem(gone) == "the file no longer exists (removed after it landed)"

    def denied(path: str) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(files.os, "lstat", denied)
    with pytest.raises(LandingReadError, match=r"gone\.jsonl: reading the file failed .*Permission denied"):
        files.file_problem(gone)
