"""Inputs of an incremental join: Delta tables read by version.

`Source` is a table already in the lake's layout (what the project's ingest writes). A Delta
table a user names, in its own layout, is an `AdaptedSource` (`adapted.py`): the same reads
with its columns renamed into the roles an operator expects and an arrival order derived from
the commit order.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins import lake

EVENT_DATE = "event_date"

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class Source:
    """A Delta table in the lake's layout, read as it is."""

    path: str

    def version(self) -> int | None:
        return lake.delta_version(self.path)

    def schema(self, spark: SparkSession, version: int) -> StructType:
        del spark, version  # the latest schema: a table's columns only ever widen
        return lake.table_schema(self.path)

    def changes(self, spark: SparkSession, after: int, last: int) -> DataFrame:
        return lake.read_changes(spark, self.path, after, last)

    def identity(self, version: int) -> lake.TableIdentity:
        return lake.table_identity(self.path, version)

    def change_stats(self, after: int, last: int) -> lake.ChangeStats | None:
        try:
            return lake.change_stats(self.path, after, last)
        except lake.LakeError:
            return None  # a rewrite in the range: the step reads the snapshot instead

    def snapshot(self, spark: SparkSession, version: int,
                 columns: Sequence[str] | None = None) -> DataFrame:
        return lake.read_delta(spark, self.path, version=version, columns=columns)

    def rows_of_days(self, spark: SparkSession, version: int, days: Sequence[dt.date]) -> DataFrame:
        """The rows whose `event_date` is one of `days`, at `version` (partition pruning when the
        table is partitioned by it)."""
        from pyspark.sql import functions as F

        try:
            return lake.read_delta(spark, self.path, version=version, partitions={EVENT_DATE: days})
        except lake.LakeError:
            # Not partitioned by the day column: filter instead.
            return self.snapshot(spark, version).where(F.col(EVENT_DATE).isin(list(days)))
