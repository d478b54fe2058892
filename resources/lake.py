"""Dagster resource for the Delta lake: a root (local directory or URI) and named tables.

All Delta I/O is delegated to `joins.lake`; this adds naming only.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field

from joins import lake
from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from joins.pipeline import PipelineLayout, PipelineSpec
    from joins.pipeline.spec import SourceLayout

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class LakeResource(ConfigurableResource):
    """Delta tables under one root: `table_path("bronze/orders")` -> `<root>/bronze/orders`."""

    root: str = Field(description="lake root: a local directory or a URI (s3://bucket/lake)")

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self.root_path()

    def root_path(self) -> str:
        """The root as an absolute local path or a URI without a trailing slash."""
        text = self.root.strip()
        if not text:
            raise ConfigError("lake.root: must not be empty")
        if _SCHEME.match(text):
            return text.rstrip("/")
        if text.startswith("file:"):
            raise ConfigError(f"lake.root: give a local directory as a plain path, got {text!r}")
        return os.path.abspath(os.path.expanduser(text))

    def layout(self, spec: PipelineSpec) -> PipelineLayout:
        """Where a pipeline's folders and tables live under this root."""
        from joins.pipeline import PipelineLayout

        return PipelineLayout(self.root_path(), spec)

    def sources(self) -> SourceLayout:
        """Where sources' folders and tables live under this root (shared by every pipeline)."""
        from joins.pipeline.spec import SourceLayout

        return SourceLayout(self.root_path())

    def table_path(self, name: str) -> str:
        """Path of table `name`: '/'-separated segments of letters, digits, '_', '.', '-'
        (not starting with '.' or '-': no hidden or parent directories)."""
        segments = name.split("/") if isinstance(name, str) else []
        if not segments or not all(_SEGMENT.match(s) for s in segments):
            raise ConfigError(f"table name {name!r}: use '/'-separated segments of letters, "
                              "digits, '_', '.', '-' (e.g. 'bronze/orders')")
        return self.root_path() + "/" + "/".join(segments)

    def exists(self, name: str) -> bool:
        return lake.table_exists(self.table_path(name))

    def version(self, name: str) -> int | None:
        return lake.delta_version(self.table_path(name))

    def txn_version(self, name: str, app_id: str) -> int | None:
        return lake.txn_version(self.table_path(name), app_id)

    def schema(self, name: str) -> StructType:
        return lake.table_schema(self.table_path(name))

    def read(self, spark: SparkSession, name: str, *, version: int | None = None,
             timestamp: dt.datetime | str | None = None, columns: list[str] | None = None,
             partitions: Mapping[str, Sequence[Any]] | None = None) -> DataFrame:
        return lake.read_delta(spark, self.table_path(name), version=version, timestamp=timestamp,
                               columns=columns, partitions=partitions)

    def read_changes(self, spark: SparkSession, name: str, from_version: int,
                     to_version: int | None = None) -> DataFrame:
        return lake.read_changes(spark, self.table_path(name), from_version, to_version)

    def write(self, df: DataFrame, name: str, **options: Any) -> lake.CommitInfo:
        """`joins.lake.write_delta` on table `name`; options as there."""
        return lake.write_delta(df, self.table_path(name), **options)

    def vacuum_orphans(self, name: str, *, older_than: dt.timedelta = dt.timedelta(hours=1),
                       dry_run: bool = False) -> list[str]:
        return lake.vacuum_orphans(self.table_path(name), older_than=older_than, dry_run=dry_run)
