"""Column expressions every operator builds, written to cost few JVM round trips.

In classic PySpark every `F.col`, `F.lit`, `F.when` or operator on a Column is a call into the
JVM (and later another to release it), and a micro-batch builds hundreds of them (well over
a thousand py4j calls for a 100-event stream-table batch), each up to a millisecond while the
JVM plans and compiles. A SQL expression string is one call however large it is, so the engine writes
its wide expressions (metrics, projections) as SQL text; identifiers from a user's config go
through `ident`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.core.time import DAY_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def ident(name: str) -> str:
    """`name` as a SQL identifier (back-quoted; any back quote doubled)."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def count_if(cond: Column | str) -> Column:
    """How many rows satisfy `cond` (0 over no rows); a string is a SQL condition."""
    from pyspark.sql import functions as F

    if isinstance(cond, str):
        return F.expr(f"count_if({cond})")
    return F.count_if(cond)


def bigint_constant(spark: SparkSession, value: int) -> Column:
    """`value` as a BIGINT column that whole-stage code generation does not write into a
    stage's Java source (`temporaljoins.Constant`): a value that changes every micro-batch
    would otherwise have the stage compiled anew every batch. A literal where the engine's
    JVM classes are not loaded (Spark Connect)."""
    from pyspark.sql import Column as _Column
    from pyspark.sql import functions as F

    from joins.spark import jvm
    from joins.spark.names import jvm_class

    if jvm.unavailable_reason(spark) is not None:
        return F.lit(value).cast("long")
    return _Column(jvm_class(spark._jvm, "temporaljoins.Constant").bigint(value))


def iso_time_sql(ms_sql: str) -> str:
    """SQL text of an event time in epoch ms (a BIGINT expression) as `joins.core.human.iso_time`
    spells it: `2024-03-02T14:05:00Z`, milliseconds only when there are some. Independent of
    the session time zone."""
    ms = f"({ms_sql})"
    # A TIMESTAMP_NTZ is a wall clock that no session zone shifts: the epoch plus an interval.
    days = f"CAST(floor({ms} / {DAY_MS}) AS INT)"
    secs = f"CAST(pmod({ms}, {DAY_MS}) AS DECIMAL(18, 6)) / 1000"
    wall = f"TIMESTAMP_NTZ'1970-01-01 00:00:00' + make_dt_interval({days}, 0, 0, {secs})"
    clock = f"date_format({wall}, \"yyyy-MM-dd'T'HH:mm:ss\")"
    frac = (f"CASE WHEN pmod({ms}, 1000) = 0 THEN '' "
            f"ELSE concat('.', lpad(CAST(pmod({ms}, 1000) AS STRING), 3, '0')) END")
    return f"CASE WHEN {ms} IS NULL THEN NULL ELSE concat({clock}, {frac}, 'Z') END"


def event_date(ts: Column) -> Column:
    """The UTC event day (a DATE) of an event time in ms: `joins.core.time.event_day` in Spark,
    the partition column of every output. Day arithmetic, not `to_date(timestamp_millis(ts))`,
    which takes the session's time zone: a session not set to UTC would file rows under the
    wrong day."""
    import datetime as dt

    from pyspark.sql import functions as F


    return F.date_add(F.lit(dt.date(1970, 1, 1)), F.floor(ts / F.lit(DAY_MS)).cast("int"))


def duration_sql(ms_sql: str) -> str:
    """SQL text of a duration in ms (a BIGINT expression) as `joins.core.human.duration`
    spells it: `30 min`, `2 days 6 h`, `1 s 500 ms`."""
    from joins.core.human import UNITS

    ms = f"abs({ms_sql})"
    parts = []
    for name, size in UNITS:
        n = f"(({ms} div {size}) % {_NEXT[name]})" if name != "day" else f"({ms} div {size})"
        plural = f"CASE WHEN {n} > 1 THEN 's' ELSE '' END" if name == "day" else "''"
        parts.append(f"CASE WHEN {n} > 0 THEN concat(CAST({n} AS STRING), ' {name}', {plural}) END")
    sign = f"CASE WHEN ({ms_sql}) < 0 THEN '-' ELSE '' END"
    return (f"CASE WHEN ({ms_sql}) IS NULL THEN NULL WHEN ({ms_sql}) = 0 THEN '0 ms' "
            f"ELSE concat({sign}, concat_ws(' ', {', '.join(parts)})) END")


# How many of a unit make the next larger one (a duration's parts below a day).
_NEXT = {"h": 24, "min": 60, "s": 60, "ms": 1000}


def expired_reason_sql(ts_sql: str, stream_time_sql: str, retention_ms: int) -> str:
    """SQL text of the quarantine reason of a put refused as beyond history retention (the
    versioned table's ingest and the table operators' versioned sides word it alike), in times
    and a duration a person reads."""
    from joins.core.human import duration

    bound = f"(({stream_time_sql}) - {int(retention_ms)})"
    retention = sql_string(f" - history retention {duration(retention_ms)} = ")
    return (f"concat('expired: ts ', {iso_time_sql(ts_sql)}, ' < stream time ', "
            f"{iso_time_sql(stream_time_sql)}, {retention}, {iso_time_sql(bound)}, '; not stored')")


# Output columns that hold an event time in epoch ms: `ts`, `<side>_ts`, `valid_from` /
# `valid_to` and their `<side>_` forms. Columns starting with `_` are the engine's own.
_TIME_SUFFIXES = ("ts", "valid_from", "valid_to")
UTC_SUFFIX = "_utc"


def event_time_columns(frame: DataFrame) -> list[str]:
    from pyspark.sql.types import LongType

    return [f.name for f in frame.schema.fields
            if isinstance(f.dataType, LongType) and not f.name.startswith("_")
            and any(f.name == s or f.name.endswith("_" + s) for s in _TIME_SUFFIXES)]


def with_utc_times(frame: DataFrame) -> DataFrame:
    """`frame` with a TIMESTAMP column `<name>_utc` right after every event-time column in
    epoch ms (the ms column stays: it is exact and what the joins compare), so that a person
    querying an output table reads times and a SQL user can filter by them."""
    present = set(frame.columns)
    missing = {n for n in event_time_columns(frame) if n + UTC_SUFFIX not in present}
    if not missing:
        return frame
    exprs: list[str] = []
    for name in frame.columns:
        exprs.append(ident(name))
        if name in missing:
            exprs.append(f"timestamp_millis({ident(name)}) AS {ident(name + UTC_SUFFIX)}")
    return frame.selectExpr(*exprs)
