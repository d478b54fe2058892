"""Landing files -> a validated changelog DataFrame plus the bad records, with their reasons.

A file that cannot be read at all (a symbolic link or another non-regular file, a file removed
since it landed, a Parquet file that does not decode, a text file Spark cannot read through) is
a bad file: it is reported whole, with the reason, and the other files are read without it, so
one bad file never blocks a batch. Row checks: `joins.landing.checks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins.errors import ConfigError, InputRecordError
from joins.landing.checks import split_cells
from joins.landing.csv_records import csv_cells
from joins.landing.files import (
    LandingFile,
    list_landing_files,
    reader_options,
    spark_path,
)
from joins.landing.long_lines import files_with_long_lines
from joins.landing.numbering import FileCells
from joins.landing.parquet import parquet_cells
from joins.landing.read_failures import raise_if_store_failed, read_error_text
from joins.landing.spec import LandingSpec, require_spec
from joins.landing.text import json_cells, no_cells, numbered_lines
from joins.spark.local_rows import local_rows
from joins.versioned.quarantine import (
    KIND_BAD_FILE,
    KIND_BAD_RECORD,
    SOURCE_FILE,
    SOURCE_ROW,
)
from joins.versioned.spark_store import ARRIVAL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

WHOLE_FILE = "<file>"


class LandingRecordError(InputRecordError):
    """A bad record in a landing file refused the batch; names the file, the row and the field."""

    def __init__(self, message: str, *, file: str, row: int, field: str, record: Any = None) -> None:
        super().__init__(message, field=field, record=record, source=f"{file}, row {row}")
        self.file = file
        self.row = row


class LandingFileError(InputRecordError):
    """A landing file that cannot be read refused the batch (`on_bad_record: fail`)."""

    def __init__(self, message: str, *, file: str) -> None:
        super().__init__(message, field=WHOLE_FILE, source=file)
        self.file = file


def bad_file_reason(path: str, problem: str) -> str:
    return f"file {path}: {problem}; the whole file is quarantined"


@dataclass
class LandingBatch:
    """A batch read from landing files. `changelog` has the key and value columns, `ts`,
    `tombstone`, `arrival`, `source_file`, `source_row`; `bad_records` has the columns the
    versioned ingest quarantines (arrival, field, reason, source_file, source_row, record,
    kind), one row per bad record and one per bad file; `bad_files` lists the bad files as
    (path, problem); `rows_at_most` bounds `changelog`'s rows when the read counted them
    (None: unknown). Call `close()` when done: the read keeps a cached copy of the lines."""

    files: tuple[str, ...]
    spec: LandingSpec
    changelog: DataFrame
    bad_records: DataFrame
    bad_files: tuple[tuple[str, str], ...] = ()
    rows_at_most: int | None = None
    _cached: list[DataFrame] = field(default_factory=list, repr=False)

    def close(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()


def first_bad_record(bad: DataFrame) -> LandingRecordError | None:
    """The error for the earliest bad record in arrival order (one aggregate, no sort)."""
    from pyspark.sql import functions as F

    row = bad.agg(F.min_by(F.struct(*bad.columns), F.col(ARRIVAL)).alias("first")).first()
    if row is None or row["first"] is None:
        return None
    first = row["first"]
    return LandingRecordError(first["_problem"], file=first[SOURCE_FILE], row=first[SOURCE_ROW],
                              field=first["field"], record=first["record"])


def _jsonl_cells(spark: SparkSession, files: list[str], spec: LandingSpec) -> FileCells:
    """The JSON-lines files' cells, without the files Spark cannot read through: a line too
    long to hold is found first (`long_lines`); a broken compressed file or a file removed
    meanwhile when the read fails, by reading each file alone."""
    from pyspark.sql import functions as F

    bad = files_with_long_lines(spark, files)
    files = [f for f in files if f not in {b for b, _ in bad}]
    if not files:
        return no_cells(spark, spec, bad)
    while True:
        try:
            lines, cached, count = numbered_lines(spark, files)
        except Exception:
            broken: list[tuple[str, str]] = []
            for path in files:
                try:
                    spark.read.options(**reader_options([path])).text(spark_path(path)).agg(
                        F.sum(F.length("value"))).collect()
                except Exception as exc:  # a JVM error of the read, whatever its class
                    raise_if_store_failed(exc, path)
                    broken.append((path, f"cannot be read: {read_error_text(exc)}"))
            if not broken:
                raise
            bad += broken
            files = [f for f in files if f not in {b for b, _ in broken}]
            if not files:
                return no_cells(spark, spec, bad)
            continue
        return FileCells(json_cells(lines, spec), cached, bad, count)


def _file_rows(spark: SparkSession, bad_files: Sequence[tuple[str, str]]) -> DataFrame:
    rows = [(None, WHOLE_FILE, bad_file_reason(path, problem), path, None, None, KIND_BAD_FILE)
            for path, problem in bad_files]
    return local_rows(spark, rows, f"{ARRIVAL} long, field string, reason string, "
                                       f"{SOURCE_FILE} string, {SOURCE_ROW} long, record string, "
                                       f"kind string")


def read_landing(spark: SparkSession, files: str | Sequence[str], spec: LandingSpec | dict[str, Any],
                 *, refused: Sequence[tuple[str, str]] = ()) -> LandingBatch:
    """Read landing files (a directory or a list of files) into a validated changelog.

    `refused` names files (path, problem) already judged unreadable (by the plan of the batch):
    they are not opened, only reported as bad files.

    Arrival order is file order (sorted by name), then row order within a file. With
    `on_bad_record: fail` a bad file raises LandingFileError and a bad record LandingRecordError
    (file, 1-based row, field) before anything is written; with `quarantine` they come back in
    `bad_records`."""
    from pyspark.sql import functions as F

    spec = require_spec(spec)
    if spec.format == "delta":
        raise ConfigError("landing: format delta is a Delta table's commits, not files: read them "
                          "with read_delta_changes")
    listed = sorted([*list_landing_files(files), *(LandingFile(p, problem) for p, problem in refused)],
                    key=lambda f: (f.name, f.path))
    bad_files = [(f.path, f.problem) for f in listed if f.problem is not None]
    readable = [f.path for f in listed if f.problem is None]
    if not readable:
        read = no_cells(spark, spec)
    elif spec.format == "parquet":
        read = parquet_cells(spark, readable, spec)
    elif spec.format == "csv":
        read = csv_cells(spark, readable, spec)
    else:
        read = _jsonl_cells(spark, readable, spec)
    cells, cached, unreadable, records = read
    order = {f.path: i for i, f in enumerate(listed)}
    bad_files = sorted([*bad_files, *unreadable], key=lambda b: order[b[0]])
    good, bad = split_cells(cells, spec)
    batch = LandingBatch(files=tuple(f.path for f in listed), spec=spec, changelog=good,
                         bad_records=bad.drop("_problem").withColumn("kind", F.lit(KIND_BAD_RECORD))
                         .unionByName(_file_rows(spark, bad_files)),
                         bad_files=tuple(bad_files), rows_at_most=records, _cached=cached)
    if spec.on_bad_record == "fail":
        error: InputRecordError | None = None
        if bad_files:
            path, problem = bad_files[0]
            error = LandingFileError(problem, file=path)
        else:
            error = first_bad_record(bad)
        if error is not None:
            batch.close()
            raise error
    return batch


def read_delta_changes(spark: SparkSession, table: str, from_version: int, to_version: int,
                       spec: LandingSpec | dict[str, Any]) -> LandingBatch:
    """The changes of a user's Delta table in (from_version, to_version] as a validated
    changelog (`joins.landing.delta_cells`), checked like landing rows: a bad record names the
    table and version as its file (`<table>@v<version>`) and its place in that commit as its
    row. A table is never a bad file: a read Delta refuses raises."""
    from pyspark.sql import functions as F

    from joins.landing.delta_cells import delta_cells

    spec = require_spec(spec)
    cells = delta_cells(spark, table, from_version, to_version, spec)
    good, bad = split_cells(cells, spec)
    batch = LandingBatch(files=(f"{table}@v{from_version + 1}..v{to_version}",), spec=spec,
                         changelog=good, bad_records=bad.drop("_problem").withColumn(
                             "kind", F.lit(KIND_BAD_RECORD)))
    if spec.on_bad_record == "fail":
        error = first_bad_record(bad)
        if error is not None:
            raise error
    return batch

