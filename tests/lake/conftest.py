"""Helpers for the lake tests: small typed event frames and on-disk inspection."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest

EVENT_SCHEMA = "id long, name string, amount double, event_date date, ts timestamp"


def events(spark: Any, rows: list[tuple[int, str | None, float | None, str, str | None]]) -> Any:
    """A DataFrame of (id, name, amount, event_date 'YYYY-MM-DD', ts ISO or None)."""
    typed = [(i, n, a, dt.date.fromisoformat(d),
              dt.datetime.fromisoformat(t).replace(tzinfo=dt.UTC) if t else None)
             for i, n, a, d, t in rows]
    return spark.createDataFrame(typed, EVENT_SCHEMA)


def files_on_disk(root: str | Path) -> set[str]:
    """Every file under the table root (relative), the log excluded."""
    out: set[str] = set()
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if not rel.startswith("_delta_log"):
                out.add(rel)
    return out


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.fixture
def table(tmp_path: Path) -> str:
    return str(tmp_path / "table")
