"""Impossible dates in spec files and SQL options: an error at their line, never a traceback
(PyYAML raises a bare ValueError from its timestamp constructor)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from joins.cli import EXIT_INVALID, main
from joins.core.yaml_text import load_yaml
from joins.errors import JoinsError
from joins.pipeline.files import read_spec_yaml

ROOT = Path(__file__).resolve().parents[1]


def test_dates_load_as_pyyaml_loads_them() -> None:
    import datetime as dt

    assert load_yaml("a: 2024-02-29\nb: '2024-02-30'\nc: 1") == {"a": dt.date(2024, 2, 29),
                                                               "b": "2024-02-30", "c": 1}


def test_an_impossible_date_in_a_yaml_file_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "join.yaml"
    path.write_text("operator: stream_table_join\nstart_date: 2024-02-30\n")
    with pytest.raises(JoinsError, match=r"line 2, column 13: not valid YAML \('2024-02-30' is no "
                                         r"date or time \(day is out of range for month\)\)"):
        read_spec_yaml(path)


def test_an_impossible_date_in_a_sql_option_is_refused_at_its_line(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "specs"
    shutil.copytree(ROOT / "pipelines" / "specs_sql", folder)
    sql = folder / "orders_with_rates.sql"
    sql.write_text(sql.read_text().replace("SET 'start_date' = '2024-03-01';",
                                           "SET 'start_date' = '2024-02-30';"))
    assert main(["check", str(folder)]) == EXIT_INVALID
    out = capsys.readouterr()
    assert "config.start_date: Input should be a valid date or datetime, day value is outside " \
           "expected range (got '2024-02-30')" in out.out + out.err
