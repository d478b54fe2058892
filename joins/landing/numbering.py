"""Arrival indices of a batch read file by file: files in arrival (name) order, then records in
file order. Each file's record count is collected (one small row per file), so every file gets
the first arrival index of its records without a single-partition window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def arrivals_by_file(spark: SparkSession, counts: Sequence[tuple[int, str, int]]) -> DataFrame:
    """(_fi, _name, _base) for (file position, file name, records) triples: `_base` is the
    arrival index of the file's first record (the records of earlier files come first)."""
    rows: list[tuple[int, str, int]] = []
    base = 0
    for position, name, n in sorted(counts):
        rows.append((position, name, base))
        base += n
    return spark.createDataFrame(rows, "_fi int, _name string, _base long")
