"""Reads of a versioned source table for display (the demo, a user's notebook): one key's
history and a few as-of lookups. They collect a handful of rows on purpose."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.pipeline.spec import PipelineInput
    from joins.versioned.spark_store import VersionedDeltaLayout


def _layout(item: PipelineInput) -> VersionedDeltaLayout:
    from joins.ingest.table import table_layout

    return table_layout(item.source.landing_spec(), item.history_retention_ms or 0)


def table_stream_time(spark: SparkSession, path: str) -> int | None:
    """The versioned table's stream time (largest ts stored; None: no table yet)."""
    from joins.versioned.spark_store import read_stream_time

    return read_stream_time(spark, path)


def versions_of_key(spark: SparkSession, item: PipelineInput, path: str, key: Any) -> list[dict[str, Any]]:
    """Every stored version of one key, oldest first: ts, values, tombstone, valid_to (the next
    version's ts; None while current)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from joins.versioned.spark_store import TOMBSTONE, TS, current_versions

    layout = _layout(item)
    key_col = item.source.key_column
    cur = current_versions(lake.read_delta(spark, path), layout).where(F.col(key_col) == F.lit(key))
    ordered = cur.withColumn("valid_to", F.lead(TS).over(Window.partitionBy(key_col).orderBy(TS)))
    rows = ordered.select(TS, *layout.value_columns, TOMBSTONE, "valid_to").orderBy(TS).collect()
    return [r.asDict() for r in rows]


def lookup_as_of(spark: SparkSession, item: PipelineInput, path: str,
                 pairs: Sequence[tuple[Any, int]]) -> list[dict[str, Any]]:
    """get(key, as_of) of the versioned table for a few (key, as_of) pairs, in the given order."""
    from pyspark.sql import functions as F

    from joins.landing.spec import SPARK_TYPES
    from joins.versioned.spark_store import read_lookup_as_of

    key_col = item.source.key_column
    key_type = item.source.key_columns[0].type
    frame = local_rows(
        spark, [(i, k, ts) for i, (k, ts) in enumerate(pairs)],
        f"_i long, {key_col} {SPARK_TYPES[key_type]}, as_of long")
    out = read_lookup_as_of(spark, path, _layout(item), frame, how="left")
    return [r.asDict() for r in out.orderBy(F.col("_i")).drop("_i").collect()]
