"""Typed cells -> a validated changelog plus the bad records, with their reasons.

Per row, the first problem in declared order wins: the whole record (too large, not UTF-8,
malformed JSON, a CSV record with the wrong number of fields), then each column in the order
keys, event time, tombstone flag, values: a missing column, a wrong type, a null key / event
time / tombstone flag, an event time outside the accepted range, a number that is not finite
(NaN, ±Infinity, or a JSON number too large for a double such as 1e400), a null in a value
column declared not nullable (a tombstone has no value, so it is exempt).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from joins.landing.spec import LandingSpec
from joins.landing.text import RECORD, RECORD_PROBLEM, WHOLE_RECORD, problem_col
from joins.versioned.quarantine import SOURCE_FILE, SOURCE_ROW
from joins.versioned.spark_store import ARRIVAL, TOMBSTONE, TS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def _utc(ms: int) -> str:
    when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ts_range(ts: Column, spec: LandingSpec) -> Column:
    from pyspark.sql import functions as F

    lo, hi = spec.ts_min_ms, spec.ts_max_ms
    hint = "the event time must lie within years 1..9999, or the declared ts_min_ms..ts_max_ms"
    return (F.when(ts < F.lit(lo), F.format_string(
        f"out of range: %d ms is before the earliest accepted event time, {lo} ms ({_utc(lo)}); "
        f"{hint}", ts))
        .when(ts > F.lit(hi), F.format_string(
            f"out of range: %d ms is after the latest accepted event time, {hi} ms ({_utc(hi)}); "
            f"{hint}", ts)))


def _finite(value: Column) -> Column:
    from pyspark.sql import functions as F

    return F.when(F.isnan(value) | (F.abs(value) == F.lit(float("inf"))), F.lit(
        "not a finite number (NaN and ±Infinity are refused; a JSON number beyond the double "
        "range such as 1e400 reads as Infinity)"))


def _checks(spec: LandingSpec, tombstone: Column) -> list[tuple[str, Column]]:
    """(field, problem) in reporting order; a problem is a reason string or null."""
    from pyspark.sql import functions as F

    def col(name: str) -> Column:
        return F.col(name)

    def typed(name: str, typ: str) -> Column:
        problem = col(problem_col(name))
        return F.coalesce(problem, _finite(col(name))) if typ == "double" else problem

    checks: list[tuple[str, Column]] = [(WHOLE_RECORD, col(RECORD_PROBLEM))]
    for c in spec.key_columns:
        checks.append((c.name, F.coalesce(typed(c.name, c.type), F.when(
            col(c.name).isNull(), F.lit("must not be null (key column)")))))
    ts = col(spec.ts_column)
    checks.append((spec.ts_column, F.coalesce(col(problem_col(spec.ts_column)), F.when(
        ts.isNull(), F.lit("must not be null (event time)")), _ts_range(ts, spec))))
    if spec.tombstone_column is not None:
        name = spec.tombstone_column
        checks.append((name, F.coalesce(col(problem_col(name)), F.when(
            col(name).isNull(), F.lit("must not be null (tombstone flag)")))))
    for c in spec.value_columns:
        problem = typed(c.name, c.type)
        if not c.nullable:
            problem = F.coalesce(problem, F.when(col(c.name).isNull() & ~tombstone, F.lit(
                "must not be null (value column declared not nullable)")))
        checks.append((c.name, problem))
    return checks


def tombstone_flag(spec: LandingSpec) -> Column:
    from pyspark.sql import functions as F

    if spec.tombstone_column is not None:
        return F.coalesce(F.col(spec.tombstone_column), F.lit(False))
    # Null-value convention: a record whose value columns are all null is a delete.
    flag = F.lit(True)
    for c in spec.value_columns:
        flag = flag & F.col(c.name).isNull()
    return flag


def split_cells(cells: DataFrame, spec: LandingSpec) -> tuple[DataFrame, DataFrame]:
    """(valid changelog, bad records) of typed cells."""
    from pyspark.sql import functions as F

    tomb = tombstone_flag(spec)
    first_problem = F.coalesce(*(F.when(problem.isNotNull(), F.struct(
        F.lit(name).alias("field"), problem.alias("problem"))) for name, problem in _checks(spec, tomb)))
    judged = cells.withColumn("_bad", first_problem).withColumn("_tomb", tomb)
    good = judged.where(F.col("_bad").isNull()).select(
        *spec.key_names,
        *(F.when(F.col("_tomb"), F.lit(None)).otherwise(F.col(n)).alias(n) for n in spec.value_names),
        F.col(spec.ts_column).cast("long").alias(TS),
        F.col("_tomb").alias(TOMBSTONE),
        ARRIVAL, SOURCE_FILE, SOURCE_ROW)
    reason = F.format_string("file %s, row %d, field '%s': %s", F.col(SOURCE_FILE), F.col(SOURCE_ROW),
                             F.col("_bad.field"), F.col("_bad.problem"))
    bad = judged.where(F.col("_bad").isNotNull()).select(
        ARRIVAL, F.col("_bad.field").alias("field"), reason.alias("reason"), SOURCE_FILE, SOURCE_ROW,
        F.col(RECORD).alias("record"), F.col("_bad.problem").alias("_problem"))
    return good, bad
