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


def changelog_frame(spark: SparkSession, records: Sequence[Any]) -> DataFrame:
    """Records with `i`, `key`, `value`, `ts` as changelog rows."""
    rows = [(key_text(r.key), value_text(r.value), r.ts, r.value is None, r.i) for r in records]
    return spark.createDataFrame(rows, CHANGELOG_SCHEMA)


def land(spark: SparkSession, path: str, records: Sequence[Any], *, create: bool = False) -> None:
    """Append `records` to the changelog table at `path` (an empty table when `create`)."""
    if records or create:
        lake.write_delta(changelog_frame(spark, records), path, mode="append")


def read_rows(spark: SparkSession, path: str, columns: list[str] | None = None) -> list[Any]:
    """Every row of a (small) table; a replay's output is what the command prints."""
    if not lake.table_exists(path):
        return []
    return lake.read_delta(spark, path, columns=columns).collect()
