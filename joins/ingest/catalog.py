"""A Delta source named in Spark's catalog (`catalog_table: db.name`) instead of by path.

Only a Spark session can ask the catalog (a Hive metastore, Unity Catalog, the session's own),
so each ingest run resolves the name to the table's location and Delta id, and records them in
a small table of the lake (`<lake>/catalog/<source>`). Sensors and the Dagster UI, which run
without Spark, read the location from that record; before the first run there is none, and the
landing sensor asks for a run to resolve it (`pipelines/sensors.py`).

The record also pins which table the source is: the ingest's batch log counts that table's
versions, so a name that later points at another table (dropped and created anew: another
Delta id) is refused rather than read from the new table's version 0 as if nothing had been
taken. The same table moved (same id, its log moved with it) is followed: the record takes
its new location.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from joins.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from joins.ingest.source import IngestSource

UNRESOLVED_PREFIX = "catalog:"


@dataclass(frozen=True)
class CatalogTable:
    """Where a catalog name pointed when it was resolved: the table's location and Delta id."""

    name: str
    location: str
    table_id: str


def unresolved_landing(name: str) -> str:
    """What a source's landing shows before its first run has resolved the name."""
    return f"{UNRESOLVED_PREFIX}{name}"


def is_unresolved(landing: str) -> bool:
    return landing.startswith(UNRESOLVED_PREFIX)


def recorded(record: str) -> CatalogTable | None:
    """The last resolution of the source (no Spark); None before its first ingest run."""
    from joins.lake import read_arrow

    rows = read_arrow(record)
    if rows is None or rows.num_rows == 0:
        return None
    last = rows.slice(rows.num_rows - 1).to_pylist()[0]
    return CatalogTable(last["catalog_table"], last["location"], last["table_id"])


def resolve(spark: SparkSession, name: str, *, source: str) -> CatalogTable:
    """The table `name` in the session's catalog: ConfigError when there is none, or it is not
    a Delta table."""
    from pyspark.errors import AnalysisException

    from joins.lake import delta_version, table_identity
    from joins.lake.location import TableLocation

    try:
        detail = spark.sql(f"DESCRIBE DETAIL {name}").select("format", "location").first()
    except AnalysisException as exc:
        first_line = str(exc).strip().splitlines()[0]
        raise ConfigError(
            f"source {source}: catalog_table {name} is not a table of this Spark session's "
            f"catalog ({first_line}). A metastore is configured through the spark resource's "
            f"extra_conf (for example spark.sql.catalogImplementation: hive)") from None
    if detail is None or (detail["format"] or "").lower() != "delta":
        kind = None if detail is None else detail["format"]
        raise ConfigError(f"source {source}: catalog_table {name} is a {kind} table, not a Delta "
                          f"table")
    location = TableLocation.of(detail["location"]).uri
    version = delta_version(location)
    if version is None:
        raise ConfigError(f"source {source}: catalog_table {name} is at {location}, where there "
                          f"is no Delta log")
    return CatalogTable(name, location, table_identity(location, version).id)


def resolved_source(spark: SparkSession, source: IngestSource, record: str,
                    before_commit: Callable[[], None]) -> IngestSource:
    """`source` with its landing at the catalog table's location, the resolution recorded (the
    first time) or checked against the record (every later run)."""
    import pyarrow as pa

    from joins.lake import write_arrow

    assert source.catalog_table is not None
    now = resolve(spark, source.catalog_table, source=source.name)
    before = recorded(record)
    if before is None or (before.table_id == now.table_id and before.location != now.location):
        # First resolved, or the same table moved (its Delta log, so its versions, went with
        # it): where it is now is recorded, under the ingest's lease, for the sensors.
        before_commit()
        write_arrow(pa.table({"catalog_table": [now.name], "location": [now.location],
                              "table_id": [now.table_id],
                              "resolved_at_ms": [int(time.time() * 1000)]}), record,
                    mode="append" if before is None else "overwrite")
    elif before.location != now.location or before.table_id != now.table_id:
        raise ConfigError(
            f"source {source.name}: catalog_table {now.name} is now the Delta table "
            f"{now.table_id} at {now.location}, but this source has ingested the versions of "
            f"{before.table_id} at {before.location} (as {before.name}). A table created anew "
            f"has versions of its own: give the new table a source of its own, or remove this "
            f"source's tables, batch log and catalog record ({record}) to start it over")
    return replace(source, landing=now.location)
