"""Delta tables as Spark DataFrames.

A table at a version (`read_delta`) is read from its snapshot's files, or by delta-spark where
files alone would give wrong rows (deletion vectors, column mapping, other reader features: a
user's table). The rows a range of commits added
(`joins.lake.changes`) are read from the commits' files (`scan_files`): delta-spark has no batch
read of a version range other than the change data feed, and its scan of a snapshot filtered
by file path does not prune files (every file of the table is read to return two). Partition
columns are not stored in the files, so `scan_files` re-attaches them:

* the fast path: when every file sits at `col=value/...` under the root and the directory
  values parse to exactly the log's values (always so for tables written by `write_delta`),
  Spark's own partition discovery attaches them as per-file constants (`basePath` = root),
  which also gives partition pruning;
* otherwise (other writers' layouts, e.g. random file prefixes) each row's file path is looked
  up in a broadcast table of (file -> partition values). Correct for any layout, but it hashes
  a decoded path per row, an order of magnitude slower than the fast path.

(A union of one scan per partition value is not used: fine for a handful of partitions, its
planning and scheduling grow with their number, to tens of seconds at a few hundred.)
"""

from __future__ import annotations

import datetime as dt
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from joins.lake.errors import LakeError, UnsupportedTableError
from joins.lake.location import TableLocation
from joins.lake.model import FileEntry
from joins.lake.schema import (
    PARTITION_TYPES,
    parse_partition_dirs,
    parse_partition_value,
    partition_value_string,
)
from joins.lake.table import open_snapshot
from joins.spark.exprs import ident
from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession

_URI_PREFIX = r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?"
_FILE_KEY = "__tj_file"
_FILE_HIT = "__tj_hit"


def read_delta(spark: SparkSession, path: str | os.PathLike[str], *, version: int | None = None,
               timestamp: dt.datetime | str | None = None, columns: Sequence[str] | None = None,
               partitions: Mapping[str, Sequence[Any]] | None = None) -> DataFrame:
    """The table at its latest version, at `version`, or as of `timestamp` (the last commit at
    or before it; a naive datetime is UTC), with the Delta schema's types and partition
    columns. `partitions` ({column: [values]}) reads only the matching partitions' files.

    A table whose files alone do not give its rows (deletion vectors, column mapping, reader
    features beyond the plain ones: a user's table) is read by delta-spark; the rest, every
    table this project writes among them, from the snapshot's files, which costs no Spark job
    to replay the log (a backfill reads many snapshots: through delta-spark each would pay
    one)."""
    snap = open_snapshot(path, version=version, timestamp=timestamp)
    assert snap is not None
    schema, parts = snap.schema, snap.partition_by
    if snap.needs_delta_spark():
        return _read_by_delta_spark(spark, snap.loc, snap.version, schema, parts, columns,
                                    partitions)
    files = snap.files()
    if partitions:
        files = _select_partitions(snap.loc, files, schema, parts, partitions)
    return scan_files(spark, snap.loc, schema, parts, files, columns)


def _read_by_delta_spark(spark: SparkSession, loc: TableLocation, version: int,
                         schema: T.StructType, partition_by: list[str],
                         columns: Sequence[str] | None,
                         partitions: Mapping[str, Sequence[Any]] | None) -> DataFrame:
    try:
        frame = spark.read.format("delta").option("versionAsOf", version).load(loc.spark_path())
    except Exception as exc:
        raise LakeError(f"{loc}: delta-spark cannot read version {version}: {exc}") from exc
    if partitions:
        # Validated against the log's partition columns and types; Delta prunes files by them.
        partition_filter_strings(loc, schema, partition_by, partitions, what="partitions")
        for column, values in partitions.items():
            frame = frame.where(_col(column).isin(list(values)))
    if columns is not None:
        names = frame.columns
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise LakeError(f"{loc}: columns {unknown} are not in the table (columns: {names})")
        if list(columns) != names:
            frame = frame.selectExpr(*(ident(c) for c in columns))
    return frame


ORIGIN_FILE, ORIGIN_ROW = "_tj_origin_file", "_tj_origin_row"


def scan_files(spark: SparkSession, loc: TableLocation, schema: T.StructType,
               partition_by: list[str], files: Sequence[FileEntry],
               columns: Sequence[str] | None, *, origin: bool = False) -> DataFrame:
    """A DataFrame over `files` with `schema` (partition columns from each file's values).
    `origin` adds each row's file (its path without scheme, decoded) and row index within the
    file (ORIGIN_FILE, ORIGIN_ROW): the physical order of a commit's rows."""
    names = schema.fieldNames()
    wanted = list(columns) if columns is not None else names
    unknown = [c for c in wanted if c not in names]
    if unknown:
        raise LakeError(f"{loc}: columns {unknown} are not in the table (columns: {names})")
    extra = [ORIGIN_FILE, ORIGIN_ROW] if origin else []
    if not files:
        fields = [schema[c] for c in wanted]
        if origin:
            fields += [T.StructField(ORIGIN_FILE, T.StringType()), T.StructField(ORIGIN_ROW, T.LongType())]
        return local_rows(spark, [], T.StructType(fields))
    data_schema = T.StructType([f for f in schema.fields if f.name not in partition_by])
    paths = [loc.spark_path(f.path) for f in files]
    if not partition_by:
        frame = _parquet(spark, spark.read.schema(data_schema), paths)
    elif hive_layout(files, schema, partition_by):
        full = T.StructType(list(data_schema.fields) + [schema[p] for p in partition_by])
        frame = _parquet(spark, spark.read.schema(full).option("basePath", loc.spark_path()),
                         paths)
    else:
        if origin:
            raise UnsupportedTableError(f"{loc}: the table's files are not laid out as col=value "
                                        "directories; their rows' arrival order cannot be read")
        frame = _join_partition_values(spark, loc, data_schema, schema, partition_by, files, paths)
    if origin:
        frame = frame.withColumn(ORIGIN_FILE, F.regexp_replace(_decoded_file(), _URI_PREFIX, "")) \
            .withColumn(ORIGIN_ROW, F.col("_metadata.row_index"))
    out = [*wanted, *extra]
    if frame.columns == out:
        return frame  # no Dataset call (each is an analysis on the driver)
    # selectExpr: one JVM call per name (a Column costs three).
    return frame.selectExpr(*(ident(c) for c in out))


def _parquet(spark: SparkSession, reader: DataFrameReader, paths: list[str]) -> DataFrame:
    """`reader.parquet(*paths)`. py4j hands a Python list to the JVM one element per call, so a
    table of thousands of files would cost thousands of round trips on every read: in classic
    PySpark the paths go as one string, split in the JVM."""
    from pyspark.sql import DataFrame as _DataFrame

    from joins.spark.connect import is_connect
    from joins.spark.names import jvm_class

    if is_connect(spark) or len(paths) < 4 or any("\n" in p for p in paths):
        return reader.parquet(*paths)
    pattern = jvm_class(spark.sparkContext._jvm, "java.util.regex.Pattern")
    split = pattern.compile("\n").split("\n".join(paths))
    return _DataFrame(reader._jreader.parquet(split), spark)  # type: ignore[attr-defined]


def _decoded_file() -> Column:
    # Spark reports the file as a URI-encoded string; decode it ('+' is literal in a path, not
    # a space).
    return F.url_decode(F.replace(F.col("_metadata.file_path"), F.lit("+"), F.lit("%2B")))


def stripped_path(path: str) -> str:
    """A Spark path without scheme and authority, as ORIGIN_FILE holds it."""
    return re.sub(_URI_PREFIX, "", path)


def hive_layout(files: Sequence[FileEntry], schema: T.StructType, partition_by: list[str]) -> bool:
    """True if Spark's partition discovery under the root yields each file's log values."""
    types = {p: schema[p].dataType for p in partition_by}
    if not all(isinstance(t, PARTITION_TYPES) for t in types.values()):
        return False
    for entry in files:
        parsed = parse_partition_dirs(posixpath.dirname(entry.path))
        if parsed is None or [k for k, _ in parsed] != partition_by:
            return False
        for name, raw in parsed:
            try:
                value = parse_partition_value(types[name], raw)
            except ValueError:
                return False
            if value != entry.partition_values.get(name):
                return False
    return True


def _join_partition_values(spark: SparkSession, loc: TableLocation, data_schema: T.StructType,
                           schema: T.StructType, partition_by: list[str],
                           files: Sequence[FileEntry], paths: list[str]) -> DataFrame:
    mapping_schema = T.StructType(
        [T.StructField(_FILE_KEY, T.StringType(), False),
         T.StructField(_FILE_HIT, T.BooleanType(), False)]
        + [T.StructField(p, schema[p].dataType, True) for p in partition_by])
    rows = [(stripped_path(path), True, *[f.partition_values.get(p) for p in partition_by])
            for f, path in zip(files, paths, strict=True)]
    mapping = local_rows(spark, rows, mapping_schema)
    # Scheme and authority dropped, so that it matches the mapping's decoded path.
    data = spark.read.schema(data_schema).parquet(*paths).withColumn(
        _FILE_KEY, F.regexp_replace(_decoded_file(), _URI_PREFIX, ""))
    joined = data.join(F.broadcast(mapping), _FILE_KEY, "left")
    missing = F.raise_error(F.concat(F.lit(f"{loc}: no partition values for file "),
                                     F.col(_FILE_KEY)))
    return joined.select(
        *[_col(f.name) for f in data_schema.fields],
        *[F.when(F.col(_FILE_HIT).isNull(), missing).otherwise(_col(p)).alias(p)
          for p in partition_by])


def _select_partitions(loc: TableLocation, files: list[FileEntry], schema: T.StructType,
                       partition_by: list[str],
                       partitions: Mapping[str, Sequence[Any]]) -> list[FileEntry]:
    wanted = partition_filter_strings(loc, schema, partition_by, partitions, what="partitions")
    out = []
    for entry in files:
        if all(partition_value_string(schema[k].dataType, entry.partition_values.get(k)) in values
               for k, values in wanted.items()):
            out.append(entry)
    return out


def partition_filter_strings(loc: TableLocation, schema: T.StructType, partition_by: list[str],
                             selection: Mapping[str, Sequence[Any]],
                             *, what: str) -> dict[str, set[str]]:
    """{column: {Delta partition strings}} from a user's {column: [values]}, validated."""
    out: dict[str, set[str]] = {}
    for column, values in selection.items():
        if column not in partition_by:
            raise LakeError(f"{loc}: {what} names '{column}', which is not a partition column "
                            f"(partition columns: {partition_by})")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | set | frozenset):
            raise LakeError(f"{loc}: {what}['{column}'] must be a list of values, got {values!r}")
        strings: set[str] = set()
        for value in values:
            if value is None:
                raise LakeError(f"{loc}: {what}['{column}'] contains None; null partitions "
                                "cannot be selected this way")
            try:
                text = partition_value_string(schema[column].dataType, value)
            except ValueError as exc:
                raise LakeError(f"{loc}: {what}['{column}'] value {value!r} does not fit "
                                f"{schema[column].dataType.simpleString()}: {exc}") from None
            assert text is not None
            strings.add(text)
        if not strings:
            raise LakeError(f"{loc}: {what}['{column}'] is empty")
        out[column] = strings
    return out


def _col(name: str) -> Column:
    return F.col(ident(name))
