"""Rows an upstream producer appends to a source table: a replay's scenario records, landed
batch by batch before each micro-batch reads them.

The rows are built on the driver from a scenario file (a few per batch), so a Spark job that
only turns them into a Parquet file costs more than the micro-batch's own work: a DataFrame
from Python rows, a write job and a transaction, 150-200 ms a landing, and 0.3 s to create each
empty input table of a replay. A user's sources are written by any producer (Kafka Connect,
delta-rs, another Spark job); the replay lands like a delta-rs one: one commit of one file
without Spark, the table created with the project's table properties and the schema Spark's
DDL gives. Rows too many for one small commit go through Spark. Columns with a Spark
expression of their own (an event day) are computed the same way in Python by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from joins.lake.small import MAX_ROWS, write_arrow
from joins.spark.local_rows import arrow_table, local_rows, struct_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def append_rows(spark: SparkSession, path: str, rows: Sequence[tuple[Any, ...]], schema: str, *,
                partition_by: list[str] | None = None) -> None:
    """Append `rows` (tuples in the order of `schema`, a Spark DDL string) to the Delta table at
    `path`, creating the table (possibly empty) if there is none."""
    from joins.lake.write import NEW_TABLE_PROPERTIES, write_delta

    if len(rows) > MAX_ROWS:
        write_delta(local_rows(spark, list(rows), schema), path, mode="append",
                    partition_by=partition_by)
        return
    data = arrow_table(rows, struct_of(spark, schema))
    write_arrow(data, path, partition_by=partition_by, configuration=NEW_TABLE_PROPERTIES,
                skip_empty=True)

