"""The most recent quarantined rows of a pipeline, with their reasons: what a person reads to
decide whether a source sends bad data. A bounded read (a few rows per quarantine table, the
newest batches first); the counts come from `counts.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from joins.pipeline.spec import PipelineLayout

# Display columns, in order; a quarantine table lacking one shows null there.
SHOWN = ("batch_id", "kind", "field", "reason", "source_file", "source_row", "ts", "record")
# The join's quarantine names its batch `_batch_id` (an output column name).
ALIASES = {"batch_id": ("batch_id", "_batch_id")}


@dataclass(frozen=True)
class QuarantinedRow:
    table: str               # which quarantine: a source's name or the join's
    values: dict[str, Any]   # SHOWN -> value


def _shown(df: DataFrame, name: str) -> Column:
    from pyspark.sql import functions as F

    for candidate in ALIASES.get(name, (name,)):
        if candidate in df.columns:
            return F.col(candidate).cast("long" if name in ("batch_id", "source_row", "ts") else "string")
    if name == "record":
        # A quarantine without the raw record (the join's late records) shows its own columns.
        rest = [c for c in df.columns if c not in {"reason", "kind", "field"}]
        return F.to_json(F.struct(*rest)) if rest else F.lit(None).cast("string")
    if name == "kind":
        return F.lit("late").cast("string")
    return F.lit(None).cast("long" if name in ("batch_id", "source_row", "ts") else "string")


def recent_quarantined(spark: SparkSession, layout: PipelineLayout, *,
                       per_table: int = 5) -> list[QuarantinedRow]:
    """The newest `per_table` rows of every quarantine table of the pipeline (committed batches
    only), newest batch first."""
    from pyspark.sql import functions as F

    from joins import lake
    from joins.versioned.quarantine import read_committed_quarantine

    out: list[QuarantinedRow] = []
    sources = {i.source.name: i.source for i in layout.spec.pipeline_inputs() if i.source is not None}
    for label, path in layout.quarantine_tables().items():
        if not lake.table_exists(path):
            continue
        source = sources.get(label)
        df = (read_committed_quarantine(spark, path, table_path=layout.table(source),
                                        source_id=source.name)
              if source is not None else lake.read_delta(spark, path))
        if df is None:
            continue
        shown = df.select(*(_shown(df, c).alias(c) for c in SHOWN))
        rows = shown.orderBy(F.col("batch_id").desc_nulls_last(), F.col("source_row").desc_nulls_last(),
                             F.col("ts").desc_nulls_last()).limit(per_table).collect()
        out += [QuarantinedRow(label, r.asDict()) for r in rows]
    return out
