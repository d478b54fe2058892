"""Writers racing on one table: first writes to a new table (from two processes with a
SparkSession each, tests/processes.py), version-guarded commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from joins.lake import AppTxn, ConcurrentCommitError, delta_version, read_delta, write_delta

pytestmark = pytest.mark.spark


def _first_write(path: str, who: int, app_version: int | None, barrier: Any, out: Any) -> None:
    from joins.spark import get_spark

    spark = get_spark()
    df = spark.createDataFrame([(who, f"writer {who}")], "id long, name string")
    txn = None if app_version is None else AppTxn("ingest", app_version)
    barrier.wait()
    info = write_delta(df, path, mode="append", app_txn=txn)
    out.put((who, info.skipped))


def _race(pair: Any, path: str, versions: tuple[int | None, int | None]) -> list[tuple[int, bool]]:
    barrier, out = pair.barrier(2), pair.queue()
    calls = [p.call(_first_write, path, i, versions[i], barrier, out) for i, p in enumerate(pair)]
    for call in calls:
        call.result(180)
    return sorted(out.get() for _ in calls)


@pytest.mark.slow
def test_two_first_writes_race_on_a_new_table(spark: Any, tmp_path: Path, two_processes: Any) -> None:
    # The same idempotent write (one app transaction) lands once, whoever creates the table.
    same = str(tmp_path / "same")
    results = _race(two_processes, same, (0, 0))
    assert sorted(skipped for _, skipped in results) == [False, True]
    assert read_delta(spark, same).count() == 1
    assert delta_version(same) == 0
    # Two different writes both land: the loser of the creation race appends to the winner's table.
    both = str(tmp_path / "both")
    assert _race(two_processes, both, (None, None)) == [(0, False), (1, False)]
    assert sorted(r["id"] for r in read_delta(spark, both).collect()) == [0, 1]


def test_version_guarded_commit(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, "a")], "id long, name string")
    write_delta(df, path, expected_version=-1)
    write_delta(df, path, expected_version=0)
    with pytest.raises(ConcurrentCommitError, match="expected the table at version 0 but it is at 1"):
        write_delta(df, path, mode="overwrite", expected_version=0)
    assert read_delta(spark, path).count() == 2
    assert delta_version(path) == 1
