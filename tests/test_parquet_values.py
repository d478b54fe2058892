"""The footer's bound on a Parquet file's rows and the scan of the row groups it cannot rule out
(`joins.landing.parquet_values`), on files written with pyarrow: no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from joins.landing.parquet_values import Suspect, row_problem, row_too_large, suspect_of

LIMIT = 1000


def write(path: Path, table: pa.Table, rows_per_group: int) -> str:
    pq.write_table(table, path, row_group_size=rows_per_group, compression="zstd")
    return str(path)


def footer(path: str) -> pq.FileMetaData:
    return pq.ParquetFile(path).metadata


def test_small_row_groups_are_ruled_out_by_the_footer(tmp_path: Path) -> None:
    table = pa.table({"k": [f"k{i}" for i in range(100)], "ts": list(range(100))})
    path = write(tmp_path / "a.parquet", table, 10)
    assert suspect_of(path, footer(path), LIMIT) is None


def test_numbers_alone_never_make_a_suspect(tmp_path: Path) -> None:
    # Fixed-width values: a row of longs is bounded by the schema, whatever the row group's size.
    table = pa.table({"ts": list(range(10_000)), "v": [1.5] * 10_000})
    path = write(tmp_path / "a.parquet", table, 10_000)
    assert footer(path).row_group(0).total_byte_size > LIMIT
    assert suspect_of(path, footer(path), LIMIT) is None


def test_a_large_row_group_of_small_rows_is_read_and_passes(tmp_path: Path) -> None:
    # Distinct keys (no dictionary shares them): the chunk is over the limit, no row is.
    table = pa.table({"k": [f"{i:050d}" for i in range(100)], "ts": list(range(100)),
                      "tags": [["a", "b"]] * 100})
    path = write(tmp_path / "a.parquet", table, 100)
    suspect = suspect_of(path, footer(path), LIMIT)
    assert suspect == Suspect(path, (0,), ("k", "tags"))
    assert row_problem(suspect, LIMIT) is None


@pytest.mark.parametrize("column, value", [
    ("k", "x" * 1500),                      # a string
    ("tags", ["y" * 400] * 4),              # a list of strings
    ("meta", {"note": "z" * 1200}),         # a struct's string
])
def test_a_row_over_the_limit_is_named_with_its_row_and_column(tmp_path: Path, column: str,
                                                                value: object) -> None:
    rows = [{"k": f"k{i}", "ts": i, "tags": ["a"], "meta": {"note": "n"}} for i in range(30)]
    rows[17][column] = value
    path = write(tmp_path / "a.parquet", pa.Table.from_pylist(rows), 10)
    suspect = suspect_of(path, footer(path), LIMIT)
    # Only the second row group (rows 11..20) can hold a row that large.
    assert suspect is not None and suspect.row_groups == (1,)
    problem = row_problem(suspect, LIMIT)
    assert problem is not None and problem.startswith("cannot be read: row 18 holds ")
    assert f"(most in column {column!r})" in problem
    size = int(problem.split(" holds ")[1].split(" bytes")[0])
    assert size > LIMIT
    assert problem == row_too_large(18, size, column, LIMIT)


def test_a_list_of_one_shared_value_is_bounded_by_its_element_count(tmp_path: Path) -> None:
    # A dictionary stores the value once and its 500 copies as a few bytes of runs: the chunk is
    # small, the row is not. Numbers the same: 10,000 equal longs take a few bytes encoded.
    table = pa.table({"k": ["a", "b"], "tags": [["v" * 10] * 500, ["w"]], "ns": [[7] * 10, [1]]})
    path = write(tmp_path / "a.parquet", table, 2)
    assert pq.ParquetFile(path).metadata.row_group(0).column(1).total_uncompressed_size < LIMIT
    suspect = suspect_of(path, footer(path), LIMIT)
    assert suspect is not None and suspect.columns == ("k", "tags", "ns")
    problem = row_problem(suspect, LIMIT)
    assert problem == row_too_large(1, 1 + 500 * 10 + 10 * 8, "tags", LIMIT)
    numbers = write(tmp_path / "b.parquet", pa.table({"ns": [[7] * 10_000]}), 1)
    assert footer(numbers).row_group(0).column(0).total_uncompressed_size < LIMIT
    suspect = suspect_of(numbers, footer(numbers), LIMIT)
    assert suspect is not None and row_problem(suspect, LIMIT) == row_too_large(1, 80_000, "ns", LIMIT)


def test_values_of_several_columns_add_up(tmp_path: Path) -> None:
    # No one value is over the limit; the row is.
    table = pa.table({"a": ["a" * 600, "b"], "b": ["c" * 600, "d"]})
    path = write(tmp_path / "a.parquet", table, 2)
    suspect = suspect_of(path, footer(path), LIMIT)
    assert suspect is not None
    problem = row_problem(suspect, LIMIT)
    assert problem is not None and problem.startswith("cannot be read: row 1 holds 1200 bytes")


def test_a_file_that_no_longer_reads_is_a_problem_not_an_error(tmp_path: Path) -> None:
    table = pa.table({"k": ["x" * 2000]})
    path = write(tmp_path / "a.parquet", table, 1)
    suspect = suspect_of(path, footer(path), LIMIT)
    assert suspect is not None
    Path(path).write_bytes(b"PAR1 not any more")
    problem = row_problem(suspect, LIMIT)
    assert problem is not None and problem.startswith("not a readable Parquet file: ")


def test_running_out_of_memory_is_an_error_not_a_problem_of_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A refused file goes to quarantine with its reason instead of being stored: a MemoryError
    # says nothing about the file, so it must fail the ingest instead, which a retry repeats.
    from joins.landing.parquet import footer_problem

    table = pa.table({"k": ["x" * 2000]})
    path = write(tmp_path / "a.parquet", table, 1)
    suspect = suspect_of(path, footer(path), LIMIT)
    assert suspect is not None

    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(pq, "ParquetFile", out_of_memory)
    with pytest.raises(MemoryError):
        row_problem(suspect, LIMIT)
    with pytest.raises(MemoryError):
        footer_problem(path)
