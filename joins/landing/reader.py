"""Landing files -> a validated changelog DataFrame plus the bad records, with their reasons.

Per row, the first problem in declared order wins: the whole line (malformed JSON, a CSV line
with the wrong number of fields), then each column in the order keys, event time, tombstone
flag, values: a missing column, a wrong type, a null key / event time / tombstone flag, a null
in a value column declared not nullable (a tombstone has no value, so it is exempt).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins.errors import InputRecordError
from joins.landing.files import list_landing_files
from joins.landing.parquet import parquet_cells
from joins.landing.spec import LandingSpec, require_spec
from joins.landing.text import (
    RECORD,
    RECORD_PROBLEM,
    WHOLE_RECORD,
    csv_cells,
    empty_cells,
    json_cells,
    numbered_lines,
    problem_col,
)
from joins.operators.versioned_table.spark_batch import ARRIVAL, TOMBSTONE, TS
from joins.operators.versioned_table.spark_incremental import SOURCE_FILE, SOURCE_ROW

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


class LandingRecordError(InputRecordError):
    """A bad record in a landing file refused the batch; names the file, the row and the field."""

    def __init__(self, message: str, *, file: str, row: int, field: str, record: Any = None) -> None:
        super().__init__(message, field=field, record=record, source=f"{file}, row {row}")
        self.file = file
        self.row = row


@dataclass
class LandingBatch:
    """A batch read from landing files. `changelog` has the key and value columns, `ts`,
    `tombstone`, `arrival`, `source_file`, `source_row`; `bad_records` has the columns the
    versioned ingest quarantines (arrival, field, reason, source_file, source_row, record).
    Call `close()` when done: the read keeps a cached copy of the lines."""

    files: tuple[str, ...]
    spec: LandingSpec
    changelog: DataFrame
    bad_records: DataFrame
    _cached: list[DataFrame] = field(default_factory=list, repr=False)

    def close(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()


def _checks(spec: LandingSpec, tombstone: Column) -> list[tuple[str, Column]]:
    """(field, problem) in reporting order; a problem is a reason string or null."""
    from pyspark.sql import functions as F

    def col(name: str) -> Column:
        return F.col(name)

    checks: list[tuple[str, Column]] = [(WHOLE_RECORD, col(RECORD_PROBLEM))]
    for c in spec.key_columns:
        checks.append((c.name, F.coalesce(col(problem_col(c.name)), F.when(
            col(c.name).isNull(), F.lit("must not be null (key column)")))))
    checks.append((spec.ts_column, F.coalesce(col(problem_col(spec.ts_column)), F.when(
        col(spec.ts_column).isNull(), F.lit("must not be null (event time)")))))
    if spec.tombstone_column is not None:
        name = spec.tombstone_column
        checks.append((name, F.coalesce(col(problem_col(name)), F.when(
            col(name).isNull(), F.lit("must not be null (tombstone flag)")))))
    for c in spec.value_columns:
        problem = col(problem_col(c.name))
        if not c.nullable:
            problem = F.coalesce(problem, F.when(col(c.name).isNull() & ~tombstone, F.lit(
                "must not be null (value column declared not nullable)")))
        checks.append((c.name, problem))
    return checks


def tombstone_flag(spec: LandingSpec) -> Column:
    from pyspark.sql import functions as F

    if spec.tombstone_column is not None:
        return F.coalesce(F.col(spec.tombstone_column), F.lit(False))
    # Null-value convention: a record whose value columns are all null is a delete.
    flag = F.lit(True)
    for c in spec.value_columns:
        flag = flag & F.col(c.name).isNull()
    return flag


def split_cells(cells: DataFrame, spec: LandingSpec) -> tuple[DataFrame, DataFrame]:
    """(valid changelog, bad records) of typed cells."""
    from pyspark.sql import functions as F

    tomb = tombstone_flag(spec)
    first_problem = F.coalesce(*(F.when(problem.isNotNull(), F.struct(
        F.lit(name).alias("field"), problem.alias("problem"))) for name, problem in _checks(spec, tomb)))
    judged = cells.withColumn("_bad", first_problem).withColumn("_tomb", tomb)
    good = judged.where(F.col("_bad").isNull()).select(
        *spec.key_names,
        *(F.when(F.col("_tomb"), F.lit(None)).otherwise(F.col(n)).alias(n) for n in spec.value_names),
        F.col(spec.ts_column).cast("long").alias(TS),
        F.col("_tomb").alias(TOMBSTONE),
        ARRIVAL, SOURCE_FILE, SOURCE_ROW)
    reason = F.format_string("file %s, row %d, field '%s': %s", F.col(SOURCE_FILE), F.col(SOURCE_ROW),
                             F.col("_bad.field"), F.col("_bad.problem"))
    bad = judged.where(F.col("_bad").isNotNull()).select(
        ARRIVAL, F.col("_bad.field").alias("field"), reason.alias("reason"), SOURCE_FILE, SOURCE_ROW,
        F.col(RECORD).alias("record"), F.col("_bad.problem").alias("_problem"))
    return good, bad


def first_bad_record(bad: DataFrame) -> LandingRecordError | None:
    """The error for the earliest bad record in arrival order (one aggregate, no sort)."""
    from pyspark.sql import functions as F

    row = bad.agg(F.min_by(F.struct(*bad.columns), F.col(ARRIVAL)).alias("first")).first()
    if row is None or row["first"] is None:
        return None
    first = row["first"]
    return LandingRecordError(first["_problem"], file=first[SOURCE_FILE], row=first[SOURCE_ROW],
                              field=first["field"], record=first["record"])


def read_landing(spark: SparkSession, files: str | Sequence[str],
                 spec: LandingSpec | dict[str, Any]) -> LandingBatch:
    """Read landing files (a directory or a list of files) into a validated changelog.

    Arrival order is file order (sorted by name), then row order within a file. With
    `on_bad_record: fail` a bad record raises LandingRecordError (file, 1-based row, field)
    before anything is written; with `quarantine` the bad rows come back in `bad_records`."""
    spec = require_spec(spec)
    listed = list_landing_files(files)
    cached: list[DataFrame] = []
    if not listed:
        cells = empty_cells(spark, spec)
    elif spec.format == "parquet":
        cells, cached = parquet_cells(spark, listed, spec)
    else:
        lines, cached = numbered_lines(spark, listed)
        cells = json_cells(lines, spec) if spec.format == "jsonl" else csv_cells(spark, lines, spec)
    good, bad = split_cells(cells, spec)
    batch = LandingBatch(files=tuple(listed), spec=spec, changelog=good,
                         bad_records=bad.drop("_problem"), _cached=cached)
    if spec.on_bad_record == "fail":
        error = first_bad_record(bad)
        if error is not None:
            batch.close()
            raise error
    return batch
