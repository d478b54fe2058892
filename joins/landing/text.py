"""JSON-lines landing files: numbered lines, then typed cells with per-cell problems.

Files are read as text so that every line keeps its file and line number and so that a type
error is seen per cell instead of being nulled by a schema-on-read parser:

- line numbers come from a two-pass scan: Spark's `_metadata.file_block_start` orders the splits
  of a file and `monotonically_increasing_id` is consecutive inside a split, so one tiny collect
  of (file, split) -> (line count, first id) gives every split its first line number and its
  first arrival index (files in name order, then lines);
- a line is first checked whole: larger than `max_record_bytes`, then not valid UTF-8 (the
  text source keeps a line's bytes as they are, so `is_valid_utf8` sees them; nothing is
  silently replaced by U+FFFD);
- JSON lines are parsed to VARIANT, whose per-value type names (`BIGINT`, `DECIMAL(2,1)`,
  `STRING`, ...) tell a missing field from a JSON null from a wrongly typed value.

CSV is read by `joins.landing.csv_records` (a record may span lines).

The output ("cells") has: source_file, source_row (1-based line number), arrival, record (the
raw line), `_p_record` (a problem with the whole line), and for every declared column its typed
value and `_p_<name>` (a problem with that cell: missing column or wrong type; nulls, ranges
and non-finite numbers are judged later, in `joins.landing.reader`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins.landing.files import display_names, reader_options, spark_path
from joins.landing.numbering import FileCells
from joins.landing.spec import SPARK_TYPES, LandingSpec
from joins.spark.local_rows import local_rows
from joins.versioned.quarantine import SOURCE_FILE, SOURCE_ROW
from joins.versioned.spark_store import ARRIVAL

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

RECORD = "record"
RECORD_PROBLEM = "_p_record"
WHOLE_RECORD = "<record>"
# A record over the size limit is kept in the quarantine as its first characters only.
SHOWN_CHARS = 1000

_INT_TYPES = ("BIGINT", "INT", "SMALLINT", "TINYINT")
_TYPE_WORDS = {"long": "an integer", "int": "a 32-bit integer", "double": "a number",
               "string": "a string", "boolean": "true or false"}


def no_cells(spark: SparkSession, spec: LandingSpec, bad: Sequence[tuple[str, str]] = ()) -> FileCells:
    """A read that found no readable record: no cells, only the files it could not read."""
    return FileCells(empty_cells(spark, spec), [], list(bad), 0)


def problem_col(name: str) -> str:
    return f"_p_{name}"


def numbered_lines(spark: SparkSession, files: Sequence[str]
                   ) -> tuple[DataFrame, list[DataFrame], int]:
    """(source_file, source_row, arrival, line) of every line, the frames to unpersist, and
    the number of lines (blank ones included)."""
    from pyspark.sql import functions as F

    raw = spark.read.options(**reader_options(files)).text([spark_path(f) for f in files]).select(
        F.col("value").alias("_line"), F.col("_metadata.file_path").alias("_fp"),
        F.col("_metadata.file_block_start").alias("_blk"),
        F.monotonically_increasing_id().alias("_mid"))
    # Persisted so the ids seen by the statistics pass are the ids joined back afterwards.
    raw = raw.persist()
    stats = raw.groupBy("_fp", "_blk").agg(F.count("*").alias("n"), F.min("_mid").alias("first"))
    try:
        splits = stats.collect()  # one row per file split: tiny
    except Exception:
        raw.unpersist()  # a file that does not read: the caller retries without it
        raise
    names = display_names(sorted({r["_fp"] for r in splits}), files)
    ordered = sorted(splits, key=lambda r: (names[r["_fp"]][0], r["_blk"]))
    offsets: list[tuple[str, int, int, str, int, int]] = []
    arrival_base = 0
    row_base: dict[str, int] = {}
    for r in ordered:
        fp = r["_fp"]
        offsets.append((fp, int(r["_blk"]), int(r["first"]), names[fp][1], row_base.get(fp, 0),
                        arrival_base))
        row_base[fp] = row_base.get(fp, 0) + int(r["n"])
        arrival_base += int(r["n"])
    offsets_df = local_rows(
        spark, offsets, "_fp string, _blk long, _first long, _name string, _row_base long, _arr_base long")
    pos = F.col("_mid") - F.col("_first")
    lines = raw.join(F.broadcast(offsets_df), on=["_fp", "_blk"]).select(
        F.col("_name").alias(SOURCE_FILE),
        (F.col("_row_base") + pos + 1).alias(SOURCE_ROW),
        (F.col("_arr_base") + pos).alias(ARRIVAL),
        F.col("_line").alias(RECORD))
    return lines, [raw], arrival_base


def _not_blank(line: Column) -> Column:
    from pyspark.sql import functions as F

    # A blank line separates nothing and holds no record: skipped, but lines keep their numbers.
    return F.trim(line) != F.lit("")


def too_large(size: Column, spec: LandingSpec) -> Column:
    """The size-limit problem of a record of `size` bytes (null: within the limit)."""
    from pyspark.sql import functions as F

    return F.when(size > F.lit(spec.max_record_bytes), F.format_string(
        f"record too large: %d bytes, over max_record_bytes ({spec.max_record_bytes})", size))


def shown_record(text: Column, size: Column, spec: LandingSpec) -> Column:
    """The record as kept in the quarantine: valid UTF-8, cut to its first characters when it
    is over the size limit."""
    from pyspark.sql import functions as F

    valid = F.make_valid_utf8(text)
    return F.when(size > F.lit(spec.max_record_bytes), F.concat(
        F.substring(valid, 1, SHOWN_CHARS), F.format_string("... (%d bytes)", size))).otherwise(valid)


def wrong_type(typ: str, shown: Column, kind: Column | None = None) -> Column:
    from pyspark.sql import functions as F

    if kind is None:
        return F.format_string(f"expected {_TYPE_WORDS[typ]} ({typ}), got %s", shown)
    return F.format_string(f"expected {_TYPE_WORDS[typ]} ({typ}), got %s (JSON %s)", shown, kind)


def json_cells(lines: DataFrame, spec: LandingSpec) -> DataFrame:
    from pyspark.sql import functions as F

    line, size = F.col(RECORD), F.octet_length(F.col(RECORD))
    whole = F.coalesce(too_large(size, spec), F.when(~F.is_valid_utf8(line), F.lit(
        "not valid UTF-8 (the line holds bytes that are no UTF-8 text)")))
    # A line refused whole is not parsed (it may be huge, or bytes that are no text).
    rows = lines.where(_not_blank(line)).withColumn("_whole", whole).withColumn(
        "_v", F.when(F.col("_whole").isNull(), F.try_parse_json(line)))
    v = F.col("_v")
    record_problem = F.coalesce(F.col("_whole"), F.when(v.isNull(), F.lit(
        "malformed JSON: the line is not a JSON value")).when(
        ~F.schema_of_variant(v).startswith("OBJECT"),
        F.lit("not a JSON object (one object per line is expected)")))
    cols: list[Column] = [F.col(SOURCE_FILE), F.col(SOURCE_ROW), F.col(ARRIVAL),
                          shown_record(line, size, spec).alias(RECORD),
                          record_problem.alias(RECORD_PROBLEM)]
    for name, typ in spec.checked_columns():
        path = f"$.{name}"
        cell = F.variant_get(v, path, "variant")
        kind = F.schema_of_variant(cell)
        if typ in ("long", "int"):
            # JSON has one number type: 1.0 is the integer 1 (parse_json gives it DECIMAL(1,0)),
            # 1.5 and 1e3 (DOUBLE) are not integers; try_variant_get catches out-of-range ones.
            integral = kind.isin(*_INT_TYPES) | kind.rlike(r"^DECIMAL\(\d+,0\)$")
            accepted = integral & F.try_variant_get(v, path, SPARK_TYPES[typ]).isNotNull()
        elif typ == "double":
            accepted = (kind.isin(*_INT_TYPES) | kind.startswith("DECIMAL")
                        | kind.isin("DOUBLE", "FLOAT"))
        elif typ == "string":
            accepted = kind == F.lit("STRING")
        else:
            accepted = kind == F.lit("BOOLEAN")
        json_null = F.is_variant_null(cell)
        problem = (F.when(v.isNull() | ~F.schema_of_variant(v).startswith("OBJECT"), F.lit(None))
                   .when(cell.isNull(), F.lit("missing (the object has no such field)"))
                   .when(~json_null & ~accepted, wrong_type(typ, F.to_json(cell), kind)))
        value = F.when(~json_null & accepted, F.try_variant_get(v, path, SPARK_TYPES[typ]))
        cols += [value.cast(SPARK_TYPES[typ]).alias(name), problem.alias(problem_col(name))]
    return rows.select(*cols)


def empty_cells(spark: SparkSession, spec: LandingSpec) -> DataFrame:
    fields = [f"{SOURCE_FILE} string", f"{SOURCE_ROW} long", f"{ARRIVAL} long", f"{RECORD} string",
              f"{RECORD_PROBLEM} string"]
    for name, typ in spec.checked_columns():
        fields += [f"{name} {SPARK_TYPES[typ]}", f"{problem_col(name)} string"]
    return local_rows(spark, [], ", ".join(fields))
