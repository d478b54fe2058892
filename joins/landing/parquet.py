"""Parquet landing files: typed cells with per-cell problems (see joins.landing.text).

Parquet carries its own column types, so a missing column or a type that the declared one
cannot hold without loss (a string or a double where an integer is declared, a timestamp as the
event time) is a problem of every row of that file. Rows are numbered by Spark's
`_metadata.row_index` (0-based position in the file, so source_row = row_index + 1); files are
read in groups of identical schema, each file's rows keep their own types.

A file that is no readable Parquet (empty, truncated, not Parquet at all: its footer does not
read; or a data page that does not decode) is returned as unreadable, with the reason, and the
other files are read without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins.landing.files import (
    display_names,
    open_landing_file,
    reader_options,
    spark_path,
)
from joins.landing.numbering import FileCells, arrivals_by_file
from joins.landing.parquet_values import Suspect, files_with_large_rows, suspect_of, unreadable
from joins.landing.spec import SPARK_TYPES, LandingSpec
from joins.landing.text import RECORD, RECORD_PROBLEM, no_cells, problem_col, too_large
from joins.spark.local_rows import local_rows
from joins.versioned.quarantine import SOURCE_FILE, SOURCE_ROW
from joins.versioned.spark_store import ARRIVAL

if TYPE_CHECKING:
    import pyarrow.parquet as pq
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

_LOSSLESS: dict[str, tuple[str, ...]] = {
    # declared type -> Spark type names (DataType.typeName()) that convert to it without loss
    "long": ("long", "integer", "short", "byte"),
    "int": ("integer", "short", "byte"),
    "double": ("double", "float", "long", "integer", "short", "byte"),
    "string": ("string",),
    "boolean": ("boolean",),
}


def _lossless(file_type: DataType, declared: str) -> bool:
    return file_type.typeName() in _LOSSLESS[declared]


def footer_problem(path: str) -> str | None:
    """Why `path` is no readable Parquet file, judged by its footer (None: it reads)."""
    return _footer(path)[1]


def _footer(path: str) -> tuple[pq.FileMetaData | None, str | None]:
    import pyarrow.parquet as pq

    try:
        with open_landing_file(path, random_access=True) as stream:
            return pq.ParquetFile(stream).metadata, None
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... per kind of damage
        return None, unreadable(exc, path)


def typed_cells(df: DataFrame, schema: StructType, spec: LandingSpec) -> DataFrame:
    """Typed cells of the columns of `schema` in `df` (which also has `_fp`, `_ri`): a missing
    column or a type the declared one cannot hold without loss is a problem of every row."""
    from pyspark.sql import functions as F

    present = {f.name: f.dataType for f in schema.fields}
    record = F.to_json(F.struct(*(F.col(f"`{n}`") for n in schema.names)))
    cols: list[Column] = [
        F.col("_fp"), F.col("_ri"), record.alias(RECORD),
        too_large(F.octet_length(record), spec).alias(RECORD_PROBLEM),
    ]
    for name, typ in spec.checked_columns():
        spark_type = SPARK_TYPES[typ]
        file_type = present.get(name)
        if file_type is None:
            cols += [F.lit(None).cast(spark_type).alias(name),
                     F.lit("missing (the file has no such column)").alias(problem_col(name))]
        elif not _lossless(file_type, typ):
            cols += [F.lit(None).cast(spark_type).alias(name),
                     F.lit(f"has type {file_type.simpleString()} in the file, expected {typ} "
                           f"(every row of the file)").alias(problem_col(name))]
        else:
            cols += [F.col(name).cast(spark_type).alias(name),
                     F.lit(None).cast("string").alias(problem_col(name))]
    return df.select(*cols)


def _read(spark: SparkSession, files: Sequence[str], schema: StructType) -> DataFrame:
    from pyspark.sql import functions as F

    return spark.read.options(**reader_options(files)).schema(schema).parquet(
        *(spark_path(f) for f in files)).select(
        "*", F.col("_metadata.file_path").alias("_fp"), F.col("_metadata.row_index").alias("_ri"))


def _decodes(spark: SparkSession, path: str, schema: StructType) -> str | None:
    """Why the data of one file does not decode (None: every column of every row reads)."""
    from pyspark.sql import functions as F

    try:
        _read(spark, [path], schema).agg(F.sum(F.hash(*(F.col(f"`{n}`") for n in schema.names)))
                                         ).collect()
    except Exception as exc:  # a JVM error of the read, whatever its class
        return unreadable(exc, path)
    return None


def _schemas(spark: SparkSession, files: Sequence[str]
             ) -> tuple[dict[str, tuple[StructType, list[str]]], list[tuple[str, str]]]:
    """The readable files grouped by schema, and (path, problem) of the others: a footer that
    does not read, a schema Spark cannot map, a row too large to hold (`parquet_values`)."""
    groups: dict[str, tuple[StructType, list[str]]] = {}
    bad: list[tuple[str, str]] = []
    suspects: list[Suspect] = []
    for path in files:
        metadata, problem = _footer(path)
        if problem is None:
            try:
                schema = spark.read.options(**reader_options([path])).parquet(spark_path(path)).schema
            except Exception as exc:  # the footer read, but Spark cannot map its schema
                problem = unreadable(exc, path)
        if problem is not None:
            bad.append((path, problem))
            continue
        assert metadata is not None
        try:
            suspect = suspect_of(path, metadata)
        except Exception as exc:  # pyarrow cannot map the schema its footer names
            bad.append((path, unreadable(exc, path)))
            continue
        if suspect is not None:
            suspects.append(suspect)
        groups.setdefault(schema.json(), (schema, []))[1].append(path)
    large = files_with_large_rows(spark, suspects)
    if large:
        bad += large.items()
        groups = {k: (schema, kept) for k, (schema, group) in groups.items()
                  if (kept := [f for f in group if f not in large])}
    return groups, sorted(bad, key=lambda b: files.index(b[0]))


def parquet_cells(spark: SparkSession, files: Sequence[str], spec: LandingSpec) -> FileCells:
    """The files' cells, each file read with its own schema."""
    from pyspark.sql import functions as F

    groups, bad = _schemas(spark, files)
    while True:
        good_files = [f for _, group in groups.values() for f in group]
        if not good_files:
            return no_cells(spark, spec, bad)
        parts = [typed_cells(_read(spark, group, schema), schema, spec)
                 for schema, group in groups.values()]
        cells = parts[0]
        for part in parts[1:]:
            cells = cells.unionByName(part)
        cells = cells.persist()
        try:
            counts = cells.groupBy("_fp").agg(F.count("*").alias("n")).collect()  # one row per file
            break
        except Exception:
            cells.unpersist()
            # A data page that does not decode fails the whole read: find the file(s) it was.
            broken = [(f, p) for schema, group in groups.values() for f in group
                      if (p := _decodes(spark, f, schema)) is not None]
            if not broken:
                raise
            bad += broken
            gone = {f for f, _ in broken}
            groups = {k: (schema, [f for f in group if f not in gone])
                      for k, (schema, group) in groups.items()}
    ordered = sorted(good_files, key=lambda f: files.index(f))
    names = display_names([r["_fp"] for r in counts], ordered)
    offsets = arrivals_by_file(spark, [(names[r["_fp"]][0], names[r["_fp"]][1], int(r["n"]))
                                       for r in counts])
    by_path = local_rows(spark, [(sp, names[sp][0]) for sp in names], "_fp string, _fi int")
    out = cells.join(F.broadcast(by_path), on="_fp").join(F.broadcast(offsets), on="_fi").select(
        F.col("_name").alias(SOURCE_FILE), (F.col("_ri") + 1).alias(SOURCE_ROW),
        (F.col("_base") + F.col("_ri")).alias(ARRIVAL),
        *(c for c in cells.columns if c not in ("_fp", "_ri")))
    return FileCells(out, [cells], sorted(bad, key=lambda b: files.index(b[0])),
                     sum(int(r["n"]) for r in counts))
