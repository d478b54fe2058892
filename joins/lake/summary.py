"""What a table holds, from its Delta log alone (no Spark job): rows in total and per partition
value, the min / max of a column, and the rows one commit added per partition value.

The answers come from the add actions' statistics (`numRecords`, `minValues`, `maxValues`), so
they cost a log read, not a scan: what a sensor, an observation or a run's metadata can afford.
A number the statistics cannot give (a file written without them) is None, never a guess.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from joins.lake.location import TableLocation
from joins.lake.log import commit_actions
from joins.lake.table import open_snapshot


@dataclass(frozen=True)
class TableSummary:
    """One version of a table as its statistics describe it."""

    version: int
    files: int
    rows: int | None                                   # None: a file has no row count
    rows_by_partition: dict[str, int | None] = field(default_factory=dict)
    min: dict[str, Any] = field(default_factory=dict)  # column -> smallest value (absent: unknown)
    max: dict[str, Any] = field(default_factory=dict)


def _partition_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _add(total: int | None, n: int | None) -> int | None:
    return None if total is None or n is None else total + n


def table_summary(path: str | os.PathLike[str] | TableLocation, *, partition_column: str | None = None,
                  columns: Sequence[str] = (), version: int | None = None) -> TableSummary | None:
    """The latest version's (or `version`'s) rows (per value of `partition_column`, as its
    Delta partition string) and the min / max of `columns`; None when there is no table."""
    snap = open_snapshot(path, version=version, missing_ok=True)
    if snap is None:
        return None
    actions = pa.table(snap.table.get_add_actions(flatten=True))
    n = actions.num_rows
    counts = (actions.column("num_records").to_pylist() if "num_records" in actions.column_names
              else [None] * n)
    rows: int | None = 0
    for c in counts:
        rows = _add(rows, c)
    by_partition: dict[str, int | None] = {}
    part = f"partition.{partition_column}"
    if partition_column is not None and part in actions.column_names:
        for value, c in zip(actions.column(part).to_pylist(), counts, strict=True):
            key = _partition_text(value)
            if key is not None:
                by_partition[key] = _add(by_partition.get(key, 0), c)
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    for col in columns:
        for prefix, out, pick in (("min", lows, min), ("max", highs, max)):
            name = f"{prefix}.{col}"
            if name not in actions.column_names or n == 0:
                continue
            values = actions.column(name).to_pylist()
            # A file without the statistic leaves the bound unknown (a null column's files
            # have no bound either, but then the table has no value of it to bound).
            if all(v is not None for v in values):
                out[col] = pick(values)
    return TableSummary(version=snap.version, files=n, rows=rows, rows_by_partition=by_partition,
                        min=lows, max=highs)


def commit_rows_by_partition(path: str | os.PathLike[str] | TableLocation, version: int,
                             column: str) -> dict[str, int | None]:
    """Rows the commit at `version` added, per Delta partition string of `column` (files
    without a row count give None for their partition)."""
    loc = TableLocation.of(path)
    out: dict[str, int | None] = {}
    for action in commit_actions(loc, version):
        added = action.get("add")
        if added is None or not added.get("dataChange", True):
            continue
        key = (added.get("partitionValues") or {}).get(column)
        if key is None:
            continue
        raw = added.get("stats")
        stats = json.loads(raw) if isinstance(raw, str) and raw else {}
        n = stats.get("numRecords")
        out[key] = _add(out.get(key, 0), n if isinstance(n, int) else None)
    return out
