"""Lines too long to read, found in blocks without holding a line (no Spark): line ends as
Spark's text reader splits them, across block boundaries, in compressed files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from joins.landing import long_lines
from joins.landing.long_lines import long_line_problem


def problem(path: Path, content: bytes, limit: int = 10) -> str | None:
    path.write_bytes(content)
    return long_line_problem(str(path), limit)


def said(line: int, limit: int = 10) -> str:
    return f"cannot be read: line {line} is longer than {limit} bytes, the longest line a reader holds"


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
def test_the_line_over_the_limit_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          block: int) -> None:
    # Small blocks cut lines and \r\n pairs anywhere; the line numbers must not move.
    monkeypatch.setattr(long_lines, "_BLOCK", block)
    f = tmp_path / "a.jsonl"
    assert problem(f, b"0123456789\n0123456789\r\n0123456789\r0123456789") is None
    assert problem(f, b"0123456789\r\n\r\n0123456789\r01234567890\n") == said(4)
    assert problem(f, b"a\rb\r\n" + b"x" * 11) == said(3)
    assert problem(f, b"x" * 11) == said(1)
    assert problem(f, b"\n\n\n" + b"x" * 11 + b"\n") == said(4)
    assert problem(f, b"") is None


def test_a_compressed_file_is_read_as_its_text(tmp_path: Path) -> None:
    assert problem(tmp_path / "a.jsonl.gz", gzip.compress(b"short\n" + b"x" * 50 + b"\n")) == said(2)
    assert problem(tmp_path / "b.jsonl.gz", gzip.compress(b"short\nshort\n")) is None
    cut = gzip.compress(b"short\n" * 1000)
    got = problem(tmp_path / "c.jsonl.gz", cut[: len(cut) // 2])
    assert got is not None and got.startswith("cannot be read: Compressed file ended")


def test_only_files_that_may_hold_a_long_line_are_scanned(tmp_path: Path) -> None:
    small, big, packed = tmp_path / "s.jsonl", tmp_path / "b.jsonl", tmp_path / "p.jsonl.gz"
    small.write_bytes(b"x" * 10)
    big.write_bytes(b"x\n" * 6)
    packed.write_bytes(gzip.compress(b"x"))
    paths = [str(p) for p in (small, big, packed)]
    assert sorted(long_lines._may_hold_a_long_line(paths, 10)) == sorted([str(big), str(packed)])


def test_a_file_gone_since_the_listing_is_scanned_and_named_unreadable(tmp_path: Path) -> None:
    gone = str(tmp_path / "gone.jsonl")
    assert long_lines._may_hold_a_long_line([gone], 10) == [gone]
    assert long_line_problem(gone, 10) == "cannot be read: No such file or directory"


def test_objects_in_a_store_are_sized_with_one_file_system(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.fs as pafs

    small, big, gone = tmp_path / "s.jsonl", tmp_path / "b c.jsonl", tmp_path / "gone.jsonl"
    small.write_bytes(b"x" * 10)
    big.write_bytes(b"x\n" * 6)
    (tmp_path / "dir.jsonl").mkdir()
    uris = [f"file://{small}", f"file://{big}", f"file://{gone}", f"file://{tmp_path}/dir.jsonl"]
    made: list[str] = []
    real = pafs.FileSystem

    class Counted:
        @staticmethod
        def from_uri(uri: str) -> tuple[pafs.FileSystem, str]:
            made.append(uri)
            return real.from_uri(uri)

    monkeypatch.setattr(pafs, "FileSystem", Counted)
    assert long_lines._may_hold_a_long_line(uris, 10) == uris[1:]
    assert made == [uris[0]]
