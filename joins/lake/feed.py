"""A table's change data feed: what a range of commits did to its rows, read by delta-spark.

For a table with `delta.enableChangeDataFeed=true`, Delta records per commit the rows it
inserted, deleted and updated (an update as a pre-image and a post-image). A changelog consumer
needs the new state of each changed row and the deletes: `read_change_feed` keeps inserts,
post-images and deletes, drops pre-images, and says which is which in CHANGE_TYPE. Unlike
`read_changes` (appends only), deletes, updates and merges are allowed in the range.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from joins.lake.changes import version_range
from joins.lake.errors import LakeError
from joins.lake.location import TableLocation
from joins.lake.log import commit_actions
from joins.lake.table import open_snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = "_change_type", "_commit_version", "_commit_timestamp"
INSERT, UPDATE, DELETE = "insert", "update_postimage", "delete"
CDF_PROPERTY = "delta.enableChangeDataFeed"


def change_feed_enabled(path: str | os.PathLike[str], version: int | None = None) -> bool:
    """Whether the table records its change data feed at `version` (latest by default)."""
    snap = open_snapshot(path, version=version)
    assert snap is not None
    return snap.configuration.get(CDF_PROPERTY, "false").lower() == "true"


def read_change_feed(spark: SparkSession, path: str | os.PathLike[str], from_version: int,
                     to_version: int | None = None) -> DataFrame:
    """The changes of the commits in (from_version, to_version] (to_version: latest): the table's
    columns plus CHANGE_TYPE (INSERT, UPDATE or DELETE), COMMIT_VERSION and COMMIT_TIMESTAMP.
    A delete row carries the deleted row's values. Refused, naming the version, where the range
    holds a commit without the feed or a schema change the feed cannot span."""
    loc = TableLocation.of(path)
    end, last = version_range(loc, from_version, to_version)
    if from_version == last:
        frame = spark.read.format("delta").option("versionAsOf", last).load(loc.spark_path())
        return frame.limit(0).selectExpr(
            "*", f"CAST(NULL AS STRING) AS {CHANGE_TYPE}", f"CAST(NULL AS BIGINT) AS {COMMIT_VERSION}",
            f"CAST(NULL AS TIMESTAMP) AS {COMMIT_TIMESTAMP}")
    first = from_version + 1
    start = open_snapshot(loc, version=first)
    assert start is not None
    if start.configuration.get(CDF_PROPERTY, "false").lower() != "true":
        raise LakeError(f"{loc}: version {first} was committed without the change data feed "
                        f"({CDF_PROPERTY} is not true there), so its deletes and updates cannot be "
                        "read as changes")
    _check_range(loc, first, last, _fields(start.table.schema().to_json()),
                 _fields(end.table.schema().to_json()))
    frame = (spark.read.format("delta").option("readChangeFeed", "true")
             .option("startingVersion", first).option("endingVersion", last)
             .load(loc.spark_path()))
    return frame.where(f"{CHANGE_TYPE} IN ('{INSERT}', '{UPDATE}', '{DELETE}')")


def _fields(schema_json: str) -> list[tuple[str, str]]:
    return [(f["name"], json.dumps(f["type"], sort_keys=True))
            for f in json.loads(schema_json)["fields"]]


def _check_range(loc: TableLocation, first: int, last: int, at_first: list[tuple[str, str]],
                 at_last: list[tuple[str, str]]) -> None:
    """Delta refuses a feed across a schema change or a commit without the feed only when the
    rows are read (a Spark job later, in words about schemas); the log says so now, by version.
    Any change of columns counts (Delta lets some additions through; a reader that splits the
    range at the version named loses nothing)."""
    changed_at = None if at_first == at_last else last
    for version in range(first + 1, last + 1):
        for action in commit_actions(loc, version):
            meta = action.get("metaData")
            if meta is None:
                continue
            if str((meta.get("configuration") or {}).get(CDF_PROPERTY, "false")).lower() != "true":
                raise LakeError(f"{loc}: version {version} turned the change data feed off "
                                f"({CDF_PROPERTY}); changes after it cannot be read as changes")
            if changed_at is not None or _fields(meta["schemaString"]) != at_last:
                changed_at = version
                break
        if changed_at == version:
            break
    if changed_at is not None:
        raise LakeError(f"{loc}: version {changed_at} changed the table's columns; the change data "
                        f"feed of versions {first}..{last} cannot span it: read up to version "
                        f"{changed_at - 1}, then from it")
