"""The CSV parser of landing files on its own (no Spark): compressed files are read as the plain
file, and a broken or truncated compressed file is refused whole, once."""

from __future__ import annotations

import bz2
import gzip
import random
from pathlib import Path

import pytest

from joins.landing.csv_parse import FILE_PROBLEM_INDEX, CsvRecord, read_csv_file

TEXT = b'k,ts,v,w\n"a\nb",1,1,x\n\nc,2,2,y\n\xffd,3,3,z\n'


def records(path: Path | str) -> list[CsvRecord]:
    return list(read_csv_file(str(path), delimiter=",", max_record_bytes=1000))


@pytest.mark.parametrize("name, pack", [("batch.csv.gz", gzip.compress), ("batch.csv.bz2", bz2.compress),
                                        ("BATCH.CSV.GZ", gzip.compress)])
def test_a_compressed_file_reads_as_the_plain_one(tmp_path: Path, name: str, pack) -> None:
    plain = tmp_path / "batch.csv"
    plain.write_bytes(TEXT)
    packed = tmp_path / name
    packed.write_bytes(pack(TEXT))
    got = records(packed)
    assert got == records(plain)
    # Row numbers are the decompressed text's lines; a bad byte is still seen, not replaced.
    assert [(r.index, r.row) for r in got] == [(0, 1), (1, 2), (2, 5), (3, 6)]
    assert got[3].problem is not None and got[3].problem.startswith("not valid UTF-8")


def test_a_compressed_file_through_a_uri_is_decompressed_once(tmp_path: Path) -> None:
    # A URI is opened through pyarrow's file systems (object stores), which would decompress a
    # `.gz` by its name on their own.
    (tmp_path / "batch.csv").write_bytes(TEXT)
    (tmp_path / "batch.csv.gz").write_bytes(gzip.compress(TEXT))
    uri = (tmp_path / "batch.csv.gz").as_uri()
    assert uri.startswith("file://")
    assert records(uri) == records(tmp_path / "batch.csv")


def test_a_truncated_gzip_file_is_refused_after_its_readable_records(tmp_path: Path) -> None:
    rng = random.Random(7)
    rows = "".join(f"k{rng.random()},{i},{i},w{rng.random()}\n" for i in range(3000)).encode()
    packed = gzip.compress(b"k,ts,v,w\n" + rows)
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(packed[: len(packed) // 2])
    got = records(path)
    # Records before the break come first; the last one voids them all (csv_records drops every
    # record of a file that has one with FILE_PROBLEM_INDEX).
    assert len(got) > 1 and all(r.index >= 0 for r in got[:-1])
    assert got[-1].index == FILE_PROBLEM_INDEX
    assert got[-1].problem == ("cannot be read: Compressed file ended before the end-of-stream "
                               "marker was reached")


@pytest.mark.parametrize("name, content, reason", [
    ("bad.csv.gz", b"\x1f\x8b not gzip", "Unknown compression method"),
    ("bad.csv.bz2", b"BZh9 not bzip2", "Invalid data stream"),
    ("plain.csv.gz", b"k,ts,v,w\n", "Not a gzipped file (b'k,')"),
])
def test_a_file_that_does_not_decompress_is_one_problem(tmp_path: Path, name: str, content: bytes,
                                                          reason: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert records(path) == [CsvRecord(FILE_PROBLEM_INDEX, None, None, None, f"cannot be read: {reason}")]


def test_a_plain_csv_file_is_never_decompressed(tmp_path: Path) -> None:
    # Only the name decides: gzip bytes in `x.csv` are text that is not UTF-8, record by record.
    path = tmp_path / "x.csv"
    path.write_bytes(gzip.compress(b"k,ts,v,w\n"))
    got = records(path)
    assert got and all(r.index >= 0 and r.problem for r in got)


def test_a_line_longer_than_the_reader_holds_refuses_the_file(tmp_path: Path) -> None:
    # Under the line limit an over-long record is quarantined on its own and the records after it
    # are split where the writer meant (here a quoted field spanning lines follows it); past the
    # limit the line is not read into memory, and the file is refused once.
    long_line = "a," + "x" * 60 + ",1,1\n"
    text = "k,ts,v,w\n" + long_line + '"b\nc",2,2,y\n'
    path = tmp_path / "long.csv"
    path.write_text(text)
    kept = list(read_csv_file(str(path), delimiter=",", max_record_bytes=40, max_line_chars=100))
    assert [(r.row, r.problem) for r in kept] == [
        (1, None), (2, "record too large: 66 bytes, over max_record_bytes (40)"), (3, None)]
    assert kept[2].fields == ["b\nc", "2", "2", "y"]
    for limit in (64, 66):   # the line is 67 characters with its line end
        got = list(read_csv_file(str(path), delimiter=",", max_record_bytes=40, max_line_chars=limit))
        assert got[-1] == CsvRecord(FILE_PROBLEM_INDEX, None, None, None,
                                    f"cannot be read: line 2 is longer than {limit} bytes, the "
                                    "longest line a reader holds")
    # A file of one endless line, with no line end at all.
    path.write_text("x" * 500)
    got = list(read_csv_file(str(path), delimiter=",", max_record_bytes=40, max_line_chars=100))
    assert [r.index for r in got] == [FILE_PROBLEM_INDEX]
    assert got[0].problem is not None and "line 1 is longer than 100 bytes" in got[0].problem
