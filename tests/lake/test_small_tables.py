"""Small tables read without Spark (`joins/lake/small.py`): their rows, and a clean exit after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from joins.lake import read_arrow, write_arrow
from joins.lake.location import TableLocation
from joins.lake.small import SmallTable, open_small

REPO = Path(__file__).resolve().parents[2]


def test_partitioned_rows_versions_and_filters_read_back(tmp_path: Path) -> None:
    path = str(tmp_path / "a table")  # a space in the root, escaped values in the partitions
    write_arrow(pa.table({"k": ["a b:c/d", "x=y%z"], "v": [1, 2]}), path, partition_by=["k"])
    write_arrow(pa.table({"k": ["é"], "v": [3]}), path)
    rows = read_arrow(path)
    assert rows is not None
    assert sorted(rows.to_pylist(), key=lambda r: r["v"]) == [
        {"k": "a b:c/d", "v": 1}, {"k": "x=y%z", "v": 2}, {"k": "é", "v": 3}]
    first = read_arrow(path, version=0)
    assert first is not None and sorted(first.column("v").to_pylist()) == [1, 2]
    picked = read_arrow(path, filters=[("k", "=", "x=y%z")])
    assert picked is not None and picked.to_pylist() == [{"k": "x=y%z", "v": 2}]
    assert read_arrow(str(tmp_path / "none")) is None


def test_a_process_that_read_a_small_table_exits_cleanly(tmp_path: Path) -> None:
    # Through delta-rs's own (Python) file system such a process aborted at exit in 18 of 20
    # runs (`terminate called without an active exception`, exit 134; on S3 16 of 20), so
    # three clean exits are no accident.
    path = str(tmp_path / "t")
    for i in range(3):
        write_arrow(pa.table({"a": [i]}), path)
    code = f"from joins.lake import read_arrow; print(read_arrow({path!r}).num_rows)"
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        assert (done.returncode, done.stdout.strip()) == (0, "3"), done.stderr[-2000:]


def test_the_rust_read_of_a_remote_store_gives_the_same_rows_and_schema(tmp_path: Path) -> None:
    # A remote table is read by delta-rs alone (`read_in_rust`); here it reads local tables,
    # each against the Arrow read of the same version and filters.
    path = str(tmp_path / "p")
    write_arrow(pa.table({"k": ["a b", "c"], "v": [1, 2], "s": ["x", None]}), path,
                partition_by=["k"])
    write_arrow(pa.table({"k": ["c"], "v": [3], "s": ["y"]}), path)
    empty = str(tmp_path / "empty")
    write_arrow(pa.table({"k": pa.array([], pa.string())}), empty)
    cases = [(path, None, None), (path, 0, None), (path, None, [("k", "=", "c")]),
             (path, None, [("v", "in", [1, 3])]), (empty, None, None)]
    for where, version, filters in cases:
        small = open_small(where, version=version)
        assert small is not None
        arrow, rust = small.read(filters), small.read_in_rust(filters)
        assert rust.schema == arrow.schema, (where, version, filters)
        assert _rows(rust) == _rows(arrow), (where, version, filters)
    assert small.read_in_rust().num_rows == 0


def test_a_remote_table_is_read_in_rust(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_arrow(pa.table({"a": [1]}), path)
    small = open_small(path)
    assert small is not None
    remote = SmallTable(TableLocation.of("s3://bucket/t"), small.table)
    monkeypatch.setattr(SmallTable, "read_in_rust", lambda self, filters=None: "rust")
    assert remote.read() == "rust"
    assert small.read().num_rows == 1


def _rows(table: pa.Table) -> list[str]:
    return sorted(str(sorted(r.items())) for r in table.to_pylist())
