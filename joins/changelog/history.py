"""Reading a two-sided table join's temporal history (`[valid_from, valid_to)` per key): which
updates of a side are versions, and the rows valid at an event time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.changelog.columns import ChangelogColumns
from joins.changelog.result import VALID_FROM, VALID_TO
from joins.versioned.prefix import P_BEFORE, prefix_stream_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def stored_updates(changelog: DataFrame, cols: ChangelogColumns, retention_ms: int | None) -> DataFrame:
    """A side's updates its store took: all of them on an unversioned side; on a versioned one
    those not older than the side's stream time (largest earlier ts) minus retention."""
    from pyspark.sql import functions as F

    if retention_ms is None:
        return changelog
    scan = prefix_stream_time(changelog, ts_col=cols.ts, seq_col=cols.seq, stream_time_before=None)
    seen = F.col(P_BEFORE)
    return scan.frame.where(seen.isNull() | (F.col(cols.ts) >= seen - F.lit(retention_ms))).drop(
        P_BEFORE, "_block")


def as_of(history: DataFrame, t: int) -> DataFrame:
    """get(key, t) for every key: the history rows valid at t."""
    from pyspark.sql import functions as F

    return history.where((F.col(VALID_FROM) <= t) & (F.col(VALID_TO).isNull() | (F.col(VALID_TO) > t)))
