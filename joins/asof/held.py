"""The version index held between micro-batches: a versioned table's history kept in the driver
(`temporaljoins.IndexCache`, joins/spark/jvm) so that a batch reads only the versions the table
gained since the batch before, not its whole history again.

A Kafka Streams task keeps its versioned store on local disk and reads the changelog topic only
to restore it; here the Delta table is the changelog and the driver's memory the store. What is
held is one table (its Delta table id) at one version, per holder (one join's table side). A
batch that starts at or after the held version merges the versions since in (one small Spark
job, none when the table gained nothing); anything else (the first batch in a process, another
table at the same path, a table rewritten meanwhile, a holder that ran ahead) indexes the whole
table, if it has at most `max_rows` versions, or returns None: the caller then indexes per batch
as before. All holders of a process together keep at most 4M versions
(`IndexCache.TOTAL_MAX_ROWS`; the least recently used give way, and read their table again at
their next batch). Answers never depend on what is held: the held index and a fresh one are the
same index.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins.asof.errors import HashCollision, duplicate_version, jvm_template, null_ts
from joins.asof.index import (
    bounds,
    built,
    index_layout,
    index_unusable,
    prepared_schema,
    prepared_table,
    probe,
)
from joins.asof.plan import AsOfPlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

# Above this many versions the history is not held: the driver's memory (about 40 bytes per
# version plus its values) and the broadcast of the index every batch grow with it; at 1M
# versions holding and narrowing measured about even (docs/stream_table_incremental.md).
# Larger tables are narrowed to each batch's keys instead (stream_table_join.history).
HELD_MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class HeldTable:
    """One versioned table as a holder reads it in one batch. Its frames (the history, the
    changes) have the columns of `schema`, in that order."""

    holder: str                                     # one held history per holder
    table_id: str                                   # the Delta table's id
    version: int                                    # the table version this batch reads
    rows: int | None                                # its rows at `version` (None: not known)
    schema: StructType
    history: Callable[[], DataFrame]                # the whole table at `version`
    changes_after: Callable[[int], DataFrame | None]  # rows after a version up to `version`;
    #                                                 None when the table was rewritten since
    sequence: tuple[str, ...]                       # orders two puts of one (key, ts): later wins
    max_rows: int = HELD_MAX_ROWS

    def key(self, plan: AsOfPlan) -> str:
        """The holder and the layout: another join of the table, or the same table read with
        other columns, holds its own history."""
        shape = "|".join([self.schema.json(), plan.table_key, plan.table_ts, str(plan.tombstone_col),
                          ",".join(plan.value_cols), str(plan.valid_from_col), ",".join(self.sequence)])
        return f"{self.holder}#{hashlib.sha256(shape.encode()).hexdigest()[:16]}"


def held_index_join(plan: AsOfPlan, stream: DataFrame, held: HeldTable) -> DataFrame | None:
    """`stream` joined through the held index of the table, or None where holding does not
    apply (the index cannot run, or nothing usable is held and the table is too large)."""
    if index_unusable(plan, stream, held.schema) is not None:
        return None
    spark = stream.sparkSession
    cache = spark._jvm.temporaljoins.IndexCache  # type: ignore[attr-defined]
    key = held.key(plan)
    at = int(cache.version(key, held.table_id))
    frame: DataFrame | None = None
    start = -1
    if at == held.version:
        start = at  # the table gained nothing: no Spark job
    elif 0 <= at < held.version:
        changes = held.changes_after(at)
        if changes is not None:
            frame, start = changes, at
    if start < 0:
        if held.rows is None or held.rows > held.max_rows:
            return None
        frame = held.history()
    if frame is not None and frame.columns != held.schema.fieldNames():
        raise ValueError(f"held table {held.holder}: a frame has columns {frame.columns}, the "
                         f"held schema {held.schema.fieldNames()}")
    schema = prepared_schema(plan, held.schema)
    layout = index_layout(plan, schema.fieldNames())
    sequence = [schema.fieldNames().index(c) for c in held.sequence]
    jframe = None if frame is None else prepared_table(plan, frame)._jdf
    jspark: Any = spark._jsparkSession  # type: ignore[attr-defined]
    try:
        index = built(lambda: cache.index(
            jspark, jspark.parseDataType(schema.json()), key, held.table_id, held.version, jframe,
            start, held.max_rows, *layout.args(), sequence, jvm_template(null_ts(plan, "table")),
            jvm_template(duplicate_version(plan)), layout.key_check_field, *bounds(plan)))
    except HashCollision:
        return None  # the per-batch path meets it too, and falls back to a SQL plan
    except Exception as exc:
        if "INDEX_CACHE_MISS" in str(exc):
            return None  # another thread of this process moved the held version meanwhile
        raise
    return probe(plan, stream, index, layout)
