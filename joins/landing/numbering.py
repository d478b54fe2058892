"""Arrival indices of a batch read file by file: files in arrival (name) order, then records in
file order. Each file's record count is collected (one small row per file), so every file gets
the first arrival index of its records without a single-partition window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class FileCells(NamedTuple):
    """What a format's reader gives `read_landing`: the cells, the frames to unpersist when the
    batch is done, the unreadable files (path, reason), and `records`: how many records the
    readable files hold, counted to number them (so no job of its own). It bounds the batch's
    good rows, which lets the versioned ingest take them as one block (`with_stream_time`)."""

    cells: DataFrame
    cached: list[DataFrame]
    unreadable: list[tuple[str, str]]
    records: int


def arrivals_by_file(spark: SparkSession, counts: Sequence[tuple[int, str, int]]) -> DataFrame:
    """(_fi, _name, _base) for (file position, file name, records) triples: `_base` is the
    arrival index of the file's first record (the records of earlier files come first)."""
    rows: list[tuple[int, str, int]] = []
    base = 0
    for position, name, n in sorted(counts):
        rows.append((position, name, base))
        base += n
    return local_rows(spark, rows, "_fi int, _name string, _base long")
