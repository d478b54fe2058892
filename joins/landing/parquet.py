"""Parquet landing files: typed cells with per-cell problems (see joins.landing.text).

Parquet carries its own column types, so a missing column or a type that the declared one
cannot hold without loss (a string or a double where an integer is declared, a timestamp as the
event time) is a problem of every row of that file. Rows are numbered by Spark's
`_metadata.row_index` (0-based position in the file, so source_row = row_index + 1); files are
read in groups of identical schema, each file's rows keep their own types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins.landing.files import display_names
from joins.landing.spec import SPARK_TYPES, LandingSpec
from joins.landing.text import RECORD, RECORD_PROBLEM, empty_cells, problem_col
from joins.operators.versioned_table.spark_batch import ARRIVAL
from joins.operators.versioned_table.spark_incremental import SOURCE_FILE, SOURCE_ROW

if TYPE_CHECKING:
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


def _group_cells(df: DataFrame, schema: StructType, spec: LandingSpec) -> DataFrame:
    from pyspark.sql import functions as F

    present = {f.name: f.dataType for f in schema.fields}
    cols: list[Column] = [
        F.col("_fp"), F.col("_ri"),
        F.to_json(F.struct(*(F.col(f"`{n}`") for n in schema.names))).alias(RECORD),
        F.lit(None).cast("string").alias(RECORD_PROBLEM),
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


def parquet_cells(spark: SparkSession, files: Sequence[str],
                  spec: LandingSpec) -> tuple[DataFrame, list[DataFrame]]:
    from pyspark.sql import functions as F

    if not files:
        return empty_cells(spark, spec), []
    groups: dict[str, tuple[StructType, list[str]]] = {}
    for path in files:
        schema = spark.read.parquet(path).schema  # the footer only
        groups.setdefault(schema.json(), (schema, []))[1].append(path)
    parts: list[DataFrame] = []
    for schema, group in groups.values():
        df = spark.read.schema(schema).parquet(*group).select(
            "*", F.col("_metadata.file_path").alias("_fp"), F.col("_metadata.row_index").alias("_ri"))
        parts.append(_group_cells(df, schema, spec))
    cells = parts[0]
    for part in parts[1:]:
        cells = cells.unionByName(part)
    cells = cells.persist()
    counts = cells.groupBy("_fp").agg(F.count("*").alias("n")).collect()  # one row per file
    names = display_names([r["_fp"] for r in counts], files)
    offsets: list[tuple[str, str, int]] = []
    base = 0
    for r in sorted(counts, key=lambda r: names[r["_fp"]][0]):
        offsets.append((r["_fp"], names[r["_fp"]][1], base))
        base += int(r["n"])
    offsets_df = spark.createDataFrame(offsets, "_fp string, _name string, _base long")
    out = cells.join(F.broadcast(offsets_df), on="_fp").select(
        F.col("_name").alias(SOURCE_FILE), (F.col("_ri") + 1).alias(SOURCE_ROW),
        (F.col("_base") + F.col("_ri")).alias(ARRIVAL),
        *(c for c in cells.columns if c not in ("_fp", "_ri")))
    return out, [cells]
