"""Counts a user checks a pipeline by: duplicated output rows, quarantined input rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from joins import lake

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.pipeline.spec import PipelineLayout


@dataclass(frozen=True)
class Duplicates:
    rows: int
    duplicated_records: int   # identities present more than once
    extra_rows: int           # rows beyond the first of each such identity


def duplicate_rows(spark: SparkSession, path: str, identity: Sequence[str]) -> Duplicates:
    """Rows of the table at `path` whose `identity` columns repeat: one aggregate."""
    from pyspark.sql import functions as F

    if not lake.table_exists(path):
        return Duplicates(0, 0, 0)
    per = lake.read_delta(spark, path, columns=list(identity)).groupBy(*identity).agg(
        F.count(F.lit(1)).alias("n"))
    row = per.agg(F.sum("n").alias("rows"),
                  F.sum(F.when(F.col("n") > 1, 1).otherwise(0)).alias("dup"),
                  F.sum(F.col("n") - 1).alias("extra")).first()
    if row is None:
        return Duplicates(0, 0, 0)
    return Duplicates(int(row["rows"] or 0), int(row["dup"] or 0), int(row["extra"] or 0))


@dataclass(frozen=True)
class QuarantineCounts:
    """Input rows of every source and the rows quarantined anywhere, by (where, kind)."""

    rows_in: int
    quarantined: int
    by_kind: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def share(self) -> float:
        return self.quarantined / self.rows_in if self.rows_in else 0.0


def count_rows(spark: SparkSession, path: str) -> int:
    """Rows of a table (0 when it does not exist): a Spark count, nothing collected."""
    if not lake.table_exists(path):
        return 0
    return lake.read_delta(spark, path).count()


def quarantine_by_kind(spark: SparkSession, path: str) -> dict[str, int]:
    """{reason kind: rows} of a quarantine table (one tiny aggregate row per kind)."""
    if not lake.table_exists(path):
        return {}
    return _by_kind(lake.read_delta(spark, path))


def _by_kind(df: DataFrame) -> dict[str, int]:
    from pyspark.sql import functions as F

    kind = F.col("kind") if "kind" in df.columns else F.lit("late")
    return {str(r["k"]): int(r["n"]) for r in
            df.groupBy(kind.alias("k")).agg(F.count("*").alias("n")).collect()}


def quarantine_counts(spark: SparkSession, layout: PipelineLayout) -> QuarantineCounts:
    """rows in = stored + quarantined rows of each source; quarantined = every source's
    quarantine table (the rows of batches whose commit point landed: a batch counts whole or
    not at all) plus the join's (rows of its inputs it did not take, already counted in)."""
    from joins.versioned.quarantine import read_committed_quarantine

    by_kind: dict[tuple[str, str], int] = {}
    rows_in = 0
    for item in layout.spec.pipeline_inputs():
        source = item.source
        if source is None:  # another pipeline's output: its quarantine is that pipeline's
            rows_in += count_rows(spark, layout.input_table(item.role))
            continue
        rows_in += count_rows(spark, layout.table(source))
        committed = read_committed_quarantine(spark, layout.quarantine(source),
                                              table_path=layout.table(source), source_id=source.name)
        for kind, n in ({} if committed is None else _by_kind(committed)).items():
            by_kind[(source.name, kind)] = n
            rows_in += n
    for kind, n in quarantine_by_kind(spark, layout.join_quarantine).items():
        by_kind[(layout.spec.name, kind)] = n
    return QuarantineCounts(rows_in=rows_in, quarantined=sum(by_kind.values()), by_kind=by_kind)
