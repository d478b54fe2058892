"""Open tables kept per (table, version) (`joins/lake/snapshots.py`): the latest version from the
log's file names agrees with delta-rs, a kept table serves only the table it was opened from
(not one created anew at the same path), and a caller who commits gets a table of its own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from joins import lake
from joins.lake.location import TableLocation
from joins.lake.snapshots import KEPT_TABLES, KeptTables, latest_local_version
from joins.lake.table import open_snapshot, table_schema


def _append(path: Path, n: int, column: str = "a") -> None:
    write_deltalake(str(path), pa.table({column: list(range(n))}), mode="append",
                    schema_mode="merge")


def test_the_latest_version_is_read_from_the_log_names(tmp_path: Path) -> None:
    path = tmp_path / "t"
    assert lake.delta_version(path) is None                  # no directory
    (path / "_delta_log").mkdir(parents=True)
    assert lake.delta_version(path) is None                  # a log without a commit
    for i in range(12):
        _append(path, i + 1)
        assert lake.delta_version(path) == DeltaTable(str(path)).version() == i
    DeltaTable(str(path)).create_checkpoint()
    log = path / "_delta_log"
    for name in ("00000000000000000099.json.tmp", "_commit_x.json.tmp", "00000000000000000050.crc",
                 "00000000000000000000.00000000000000000009.compacted.json"):
        (log / name).write_text("")                          # none of these is a commit
    assert any(n.endswith(".checkpoint.parquet") for n in os.listdir(log))
    assert latest_local_version(TableLocation.of(path)) == 11


def test_one_version_opened_once_serves_every_reader(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, 3)
    KEPT_TABLES.clear()
    first = open_snapshot(path)
    assert first is not None
    again = open_snapshot(path, version=0)
    assert again is not None and again.table is first.table  # the latest, then pinned: one open
    _append(path, 2)
    newer = open_snapshot(path)
    assert newer is not None and newer.version == 1 and newer.table is not first.table
    assert first.version == 0                                # a kept table never moves
    assert newer.rows() == 5 and open_snapshot(path, version=0).rows() == 3   # type: ignore[union-attr]


def test_a_table_created_anew_at_the_same_path_is_not_served_from_the_old_one(
        tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, 3)
    _append(path, 3)
    old = open_snapshot(path)
    assert old is not None and old.rows() == 6
    shutil.rmtree(path)
    _append(path, 1, column="b")
    _append(path, 1, column="b")                              # the same versions, 0 and 1
    new = open_snapshot(path)
    assert new is not None and new.table is not old.table
    assert new.rows() == 2 and table_schema(path).fieldNames() == ["b"]
    pinned = open_snapshot(path, version=1)
    assert pinned is not None and pinned.rows() == 2


def test_a_caller_who_commits_gets_a_table_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, 1)
    shared = open_snapshot(path)
    own = open_snapshot(path, shared=False)
    assert shared is not None and own is not None and own.table is not shared.table
    lake.set_table_properties(path, {"a.b": "1"}, expected_version=0)
    assert shared.version == 0 and lake.table_properties(path) == {"a.b": "1"}


def test_the_least_recently_used_tables_are_dropped(tmp_path: Path) -> None:
    kept = KeptTables(size=2)
    tables = []
    for name in "xyz":
        _append(tmp_path / name, 1)
        table = DeltaTable(str(tmp_path / name))
        kept.put(TableLocation.of(tmp_path / name), table)
        tables.append(table)
    assert kept.get(TableLocation.of(tmp_path / "x"), 0) is None
    assert kept.get(TableLocation.of(tmp_path / "z"), 0) is tables[2]
