"""The driver's side of a read the store failed in a Spark task (joins/landing/read_failures.py):
the task tells it, and the driver raises it naming the file, instead of refusing the file. The
tasks' side (which errors count) is tests/test_landing_read_failures.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from joins.landing import csv_records
from joins.landing.csv_parse import READ_FAILED_INDEX
from joins.landing.csv_records import _RECORDS, csv_cells
from joins.landing.per_file import refused_files
from joins.landing.read_failures import LandingReadError
from joins.landing.spec import LandingSpec

pytestmark = pytest.mark.spark


def test_a_file_check_the_store_failed_in_a_task_is_raised_on_the_driver(spark: Any) -> None:
    def judge(path: str) -> str | None:
        if path == "b":
            raise LandingReadError(path, "[Errno 104] Connection reset by peer")
        return "refused" if path == "c" else None

    rows = [("a",), ("b",), ("c",)]
    with pytest.raises(LandingReadError, match=r"^b: reading the file failed \(\[Errno 104\]"):
        refused_files(spark, rows, "path string", judge)
    assert refused_files(spark, [("a",), ("c",)], "path string", judge) == {"c": "refused"}


def test_a_csv_read_the_store_failed_in_a_task_is_raised_on_the_driver(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = LandingSpec.parse({"format": "csv", "key_columns": [{"name": "k", "type": "string"}],
                              "value_columns": [{"name": "v", "type": "long"}], "ts_column": "ts",
                              "on_bad_record": "quarantine"})
    files = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]

    def records(spark: Any, files: list[str], spec: LandingSpec) -> Any:
        # What the tasks give when b.csv's read failed (csv_parse.read_csv_file).
        return spark.createDataFrame([(1, READ_FAILED_INDEX, None, None, None, "timed out")], _RECORDS)

    monkeypatch.setattr(csv_records, "csv_records", records)
    with pytest.raises(LandingReadError, match=r"b\.csv: reading the file failed \(timed out\)"):
        csv_cells(spark, files, spec)
