"""What the Spark replays of the table-result operators share: scenario records landed as
changelog tables (`key` and `value` as canonical JSON text, `ts`, `tombstone`, `_seq` = the
record's arrival index), and their output rows read back as items.

Keys are `joins.core.keys.key_text`, so that two keys are equal strings in Spark exactly when
the reference engine takes them as one key (1 and 1.0 are two keys).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.changelog.values import FIELD_TYPE, JsonValues, field_column
from joins.core.fields import canonical_json
from joins.core.keys import key_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CHANGELOG_SCHEMA = "key string, value string, ts long, tombstone boolean, _seq long"


def value_text(value: Any) -> str | None:
    """A value as the replay stores it (None: a tombstone)."""
    return None if value is None else canonical_json(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def changelog_frame(spark: SparkSession, records: Sequence[Any],
                    values: JsonValues | None = None) -> DataFrame:
    """Records with `i`, `key`, `value`, `ts` as changelog rows; with `values`, plus one FIELD
    column per path of the value model (what an ingest with a declared schema extracts)."""
    paths = () if values is None else values.paths
    schema = CHANGELOG_SCHEMA + "".join(f", {field_column(n)} {FIELD_TYPE}" for n in range(len(paths)))
    rows = [(key_text(r.key), value_text(r.value), r.ts, r.value is None, r.i,
             *(() if values is None else values.land_columns(r.value))) for r in records]
    return spark.createDataFrame(rows, schema)


def land(spark: SparkSession, path: str, records: Sequence[Any], *, create: bool = False,
         values: JsonValues | None = None) -> None:
    """Append `records` to the changelog table at `path` (an empty table when `create`)."""
    if records or create:
        lake.write_delta(changelog_frame(spark, records, values), path, mode="append")


def read_rows(spark: SparkSession, path: str, columns: list[str] | None = None) -> list[Any]:
    """Every row of a (small) table; a replay's output is what the command prints."""
    if not lake.table_exists(path):
        return []
    return lake.read_delta(spark, path, columns=columns).collect()
