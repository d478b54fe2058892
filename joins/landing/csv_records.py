"""CSV landing files -> typed cells with per-cell problems (the contract of `joins.landing.text`).

Records are parsed by `joins.landing.csv_parse` inside Spark tasks, one file per task, so a
quoted field may hold newlines and the row number is the line the record starts on. Then, in
Spark: each file's header (its first record, one small row per file; or the declared
`csv_columns`), the field count against it, and every declared column checked and cast from
text (an empty field is null). A first record that does not name the key and event-time
columns is no header: it is quarantined as a record like any other (never lost), and the rows
after it lack those columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from joins.landing.csv_parse import READ_FAILED_INDEX, read_csv_file
from joins.landing.numbering import FileCells, arrivals_by_file
from joins.landing.read_failures import LandingReadError
from joins.landing.spec import SPARK_TYPES, LandingSpec
from joins.landing.text import RECORD, RECORD_PROBLEM, empty_cells, no_cells, problem_col, wrong_type
from joins.spark.local_rows import local_rows
from joins.versioned.quarantine import SOURCE_FILE, SOURCE_ROW
from joins.versioned.spark_store import ARRIVAL

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

_RECORDS = "_fi int, _idx long, _row long, _raw string, _fields array<string>, _problem string"
_BATCH = 4096


def _parse_files(delimiter: str, max_record_bytes: int
                 ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        schema = pa.schema([("_fi", pa.int32()), ("_idx", pa.int64()), ("_row", pa.int64()),
                            ("_raw", pa.string()), ("_fields", pa.list_(pa.string())),
                            ("_problem", pa.string())])
        for batch in batches:
            for fi, path in zip(batch.column("_fi").to_pylist(), batch.column("_path").to_pylist(),
                                strict=True):
                out: dict[str, list] = {name: [] for name in schema.names}
                for rec in read_csv_file(path, delimiter=delimiter, max_record_bytes=max_record_bytes):
                    for name, value in zip(schema.names, (fi, rec.index, rec.row, rec.raw, rec.fields,
                                                          rec.problem), strict=True):
                        out[name].append(value)
                    if len(out["_fi"]) >= _BATCH:
                        yield pa.RecordBatch.from_pydict(out, schema=schema)
                        out = {name: [] for name in schema.names}
                if out["_fi"]:
                    yield pa.RecordBatch.from_pydict(out, schema=schema)

    return parse


def csv_records(spark: SparkSession, files: Sequence[str], spec: LandingSpec) -> DataFrame:
    """(_fi, _idx, _row, _raw, _fields, _problem) of every record of `files` (`_fi` = position
    in `files`); `_idx` -1 marks a file that could not be read, -2 a read that failed for a
    reason not the file's (`read_failures`): one row each, its reason in `_problem`."""
    listing = local_rows(spark, list(enumerate(files)), "_fi int, _path string")
    listing = listing.repartition(min(len(files), 256), "_fi")
    return listing.mapInArrow(_parse_files(spec.csv_delimiter, spec.max_record_bytes), _RECORDS)


def _csv_cell(text: Column, typ: str) -> tuple[Column, Column]:
    """(typed value, problem) of one CSV field given as text (null: empty field)."""
    from pyspark.sql import functions as F

    trimmed = F.trim(text)
    if typ in ("long", "int"):
        # The pattern keeps "1.0", "1e3" and "12:00" out whatever the cast's leniency.
        typed = F.when(trimmed.rlike(r"^[+-]?[0-9]+$"), trimmed.try_cast(SPARK_TYPES[typ]))
    elif typ == "double":
        typed = trimmed.try_cast("double")
    elif typ == "boolean":
        typed = (F.when(F.lower(trimmed) == "true", F.lit(True))
                 .when(F.lower(trimmed) == "false", F.lit(False)))
    else:
        typed = text
    shown = F.format_string("'%s'", text)
    problem = F.when(text.isNotNull() & typed.isNull(), wrong_type(typ, shown))
    return typed.cast(SPARK_TYPES[typ]), problem


def _headers(records: DataFrame, spec: LandingSpec, n_files: int) -> dict[int, tuple[str, ...] | None]:
    """File position -> its columns; None: the first record is unreadable (no header)."""
    from pyspark.sql import functions as F

    if not spec.csv_header:
        return dict.fromkeys(range(n_files), tuple(spec.csv_columns or ()))
    first = records.where(F.col("_idx") == 0).select("_fi", "_fields").collect()  # one per file
    return {r["_fi"]: None if r["_fields"] is None else tuple((h or "").strip() for h in r["_fields"])
            for r in first}


def _not_a_header(header: tuple[str, ...], spec: LandingSpec) -> list[str]:
    needed = [*spec.key_names, spec.ts_column]
    if spec.tombstone_column is not None:
        needed.append(spec.tombstone_column)
    return [n for n in needed if n not in header]


def csv_cells(spark: SparkSession, files: Sequence[str], spec: LandingSpec) -> FileCells:
    """The files' cells; the records counted include each file's header line."""
    from pyspark.sql import functions as F

    if not files:
        return no_cells(spark, spec)
    records = csv_records(spark, files, spec).persist()
    try:
        unreadable: dict[int, str] = {}
        for r in records.where(F.col("_idx") < 0).select("_fi", "_idx", "_problem").collect():
            if r["_idx"] == READ_FAILED_INDEX:
                raise LandingReadError(files[r["_fi"]], r["_problem"])
            unreadable[r["_fi"]] = r["_problem"]
        records_ok = records.where(~F.col("_fi").isin(list(unreadable)) if unreadable else F.lit(True))
        counts = [(r["_fi"], files[r["_fi"]], int(r["n"])) for r in
                  records_ok.groupBy("_fi").agg(F.count("*").alias("n")).collect()]
        headers = _headers(records_ok, spec, len(files))
    except Exception:
        records.unpersist()
        raise
    numbered = records_ok.join(F.broadcast(arrivals_by_file(spark, counts)), on="_fi")
    parts: list[DataFrame] = []
    by_header: dict[tuple[str, ...] | None, list[int]] = {}
    for fi, header in headers.items():
        by_header.setdefault(header, []).append(fi)
    for header, group in by_header.items():
        parts.append(_group_cells(numbered.where(F.col("_fi").isin(group)), header, spec))
    out = parts[0] if parts else empty_cells(spark, spec)
    for part in parts[1:]:
        out = out.unionByName(part)
    return FileCells(out, [records], [(files[fi], reason) for fi, reason in sorted(unreadable.items())],
                     sum(n for _, _, n in counts))


def _group_cells(rows: DataFrame, header: tuple[str, ...] | None, spec: LandingSpec) -> DataFrame:
    from pyspark.sql import functions as F

    columns = header or ()
    missing = [] if header is None else _not_a_header(header, spec)
    is_header = F.lit(spec.csv_header) & (F.col("_idx") == 0)
    width = len(columns)
    if header is None:
        shape = F.lit("the file's first record cannot be read, so the file has no header")
    else:
        shape = F.when(F.size("_fields") != width, F.format_string(
            f"the record has %d field(s), not the header's {width} field(s) ({', '.join(columns)})",
            F.size("_fields")))
    record_problem = F.coalesce(F.col("_problem"), shape)
    if missing:
        # Not a header: the first record is a record that lost its place, not a header.
        record_problem = F.when(is_header, F.lit(
            f"not a header: it does not name the column(s) {', '.join(missing)} (a CSV file starts "
            f"with a header line naming its columns, or declare csv_columns with csv_header: "
            f"false)")).otherwise(record_problem)
    elif header is not None:
        rows = rows.where(~is_header)
    # With no header (its first record unreadable), that record stays: it is quarantined with
    # its own problem, like the records after it, rather than dropped as a header unseen.
    cols: list[Column] = [F.col("_name").alias(SOURCE_FILE), F.col("_row").alias(SOURCE_ROW),
                          (F.col("_base") + F.col("_idx")).alias(ARRIVAL),
                          F.col("_raw").alias(RECORD), record_problem.alias(RECORD_PROBLEM)]
    ok = record_problem.isNull()
    for name, typ in spec.checked_columns():
        if name not in columns:
            cols += [F.lit(None).cast(SPARK_TYPES[typ]).alias(name),
                     F.when(ok, F.lit("missing (the header has no such column)")).alias(problem_col(name))]
            continue
        typed, problem = _csv_cell(F.try_element_at("_fields", F.lit(columns.index(name) + 1)), typ)
        cols += [F.when(ok, typed).alias(name), F.when(ok, problem).alias(problem_col(name))]
    return rows.select(*cols)
