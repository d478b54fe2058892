"""The reason a late stream record is quarantined (KIP-923: older than stream time - grace),
in times and durations a person reads, as text (the reference processor's) and as a Spark
expression that spells it identically."""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.core.human import duration, iso_time

if TYPE_CHECKING:
    from pyspark.sql import Column

_PARTS = ("late stream record: ts ", " is older than the join buffer's stream time ",
          " minus grace {grace} (= ", "); records up to it may already have been joined, so this "
          "one can no longer be joined in timestamp order. A grace_ms of at least ",
          " would have joined it")


def late_reason_text(ts: int, stream_time: int, grace_ms: int) -> str:
    """The quarantine reason of a record at `ts` late for a buffer at `stream_time`."""
    a, b, c, d, e = _PARTS
    return (f"{a}{iso_time(ts)}{b}{iso_time(stream_time)}{c.format(grace=duration(grace_ms))}"
            f"{iso_time(stream_time - grace_ms)}{d}{stream_time - ts}{e}")


def late_reason(ts_sql: str, stream_time_sql: str, grace_ms: int) -> Column:
    """`late_reason_text` as a Spark expression (ts and stream time: SQL text of BIGINTs)."""
    from pyspark.sql import functions as F

    from joins.spark.exprs import iso_time_sql, sql_string

    a, b, c, d, e = (sql_string(p.format(grace=duration(grace_ms))) for p in _PARTS)
    ts, st = f"({ts_sql})", f"({stream_time_sql})"
    return F.expr(f"concat({a}, {iso_time_sql(ts)}, {b}, {iso_time_sql(st)}, {c}, "
                  f"{iso_time_sql(f'{st} - {int(grace_ms)}')}, {d}, CAST({st} - {ts} AS STRING), "
                  f"{e})")
