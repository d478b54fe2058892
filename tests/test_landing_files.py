"""Which landing files a batch reads and why some cannot be read, for local paths and URIs
(no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from joins.errors import ConfigError
from joins.landing.files import file_problem, list_landing_files


def test_named_objects_are_asked_about_with_one_file_system_per_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.fs as pafs

    (tmp_path / "b c.jsonl").write_bytes(b"{}\n")
    (tmp_path / "a.jsonl").write_bytes(b"{}\n")
    (tmp_path / "dir.jsonl").mkdir()
    uris = [f"file://{tmp_path}/b c.jsonl", f"file://{tmp_path}/gone.jsonl",
            f"file://{tmp_path}/a.jsonl", f"file://{tmp_path}/dir.jsonl"]
    made: list[str] = []
    real = pafs.FileSystem

    class Counted:
        @staticmethod
        def from_uri(uri: str) -> tuple[pafs.FileSystem, str]:
            made_now = real.from_uri(uri)
            made.append(uri)
            return made_now

    monkeypatch.setattr(pafs, "FileSystem", Counted)
    listed = list_landing_files(uris)
    # "b c.jsonl" is no URI (a space) and takes the store's file system from the next.
    assert made == [uris[1]]
    assert [(f.name, f.problem) for f in listed] == [
        ("a.jsonl", None), ("b c.jsonl", None),
        ("dir.jsonl", "not a regular file (a directory)"),
        ("gone.jsonl", "the file no longer exists (removed after it landed)")]


def test_local_files_keep_their_reasons(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"{}\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "a.jsonl")
    (tmp_path / "d").mkdir()
    listed = list_landing_files([str(tmp_path / n) for n in ("link.jsonl", "a.jsonl", "d")])
    assert [(f.name, f.problem) for f in listed] == [
        ("a.jsonl", None), ("d", "a directory, not a regular file"),
        ("link.jsonl", "a symbolic link: links are not followed, land the file itself")]
    with pytest.raises(ConfigError, match=r"landing file .*nope\.jsonl' does not exist"):
        list_landing_files([str(tmp_path / "nope.jsonl")])
    assert file_problem(f"file://{tmp_path}/nope.jsonl") == \
        "the file no longer exists (removed after it landed)"
