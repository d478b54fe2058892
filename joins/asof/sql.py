"""The pure-SQL as-of join plans (strategies "broadcast" and "shuffle"): bucketed validity
intervals.

1. Table side. Every version gets its validity interval [valid_from, valid_to), valid_to being
   the key's next version ts (a window `lead` over the table only, the small side). Per key, the
   span [min ts, max ts] is cut into ceil(versions / versions_per_bucket) equal-width time
   buckets, so a hot key gets proportionally more, finer buckets. Each version is copied into
   every bucket its interval overlaps: that carries the previous version into a bucket where no
   version starts. Total rows <= versions + buckets.
2. Stream side. Each row computes its key's bucket for its ts with integer arithmetic (clamped
   to the key's first / last bucket) and equi-joins on (key, bucket) under the condition
   valid_from <= ts < valid_to. Exactly one interval contains ts, so the join output IS the
   answer: no window, no aggregation and no sort on the stream side.

Why it is skew-proof: a stream row examines the intervals of one bucket, about
versions_per_bucket + 1 whatever the size of its key, where an equi-join on the key alone
examines all versions of the key (quadratic on a hot key). With the table broadcast the stream
is never shuffled, so a hot key costs what any key costs; with a shuffle the shuffle key
(key, bucket) spreads a hot key over as many tasks as it has buckets, and Spark's adaptive skew
join splits a stream partition that is still oversized.

The bucket arithmetic runs under ANSI mode, where a long overflow fails the query, and a key's
versions may span the whole long range (a "since forever" version at the minimum long next to
real ones): see `_bucket_sql`.

The query is generated as one SQL text over two temporary views: building it through the
DataFrame API costs a JVM round trip per expression node, which at a million rows was a sizeable
share of the whole join's time.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from joins.asof.errors import duplicate_version, null_ts, sql_message
from joins.asof.plan import LONG_MAX, LONG_MIN, RESERVED_PREFIX, AsOfPlan, saturate
from joins.spark.exprs import ident

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

P = RESERVED_PREFIX


def _long(value: int) -> str:
    # The literal of the minimum long does not parse as a BIGINT (its magnitude is a decimal).
    return f"CAST({value} AS BIGINT)"


def _ts_text(long_sql: str, plan: AsOfPlan) -> str:
    """A ts in its long form as it prints in its own type (a timestamp in the session time zone,
    as the JVM index prints it)."""
    return (f"CAST({long_sql} AS STRING)" if plan.ts_kind == "integral"
            else f"CAST(timestamp_micros({long_sql}) AS STRING)")


def _ts_long(col_sql: str, key_sql: str, plan: AsOfPlan, side: Literal["table", "stream"]) -> str:
    """The ts as a long (epoch ms, or micros for timestamps); a null ts fails the query naming
    the record: it cannot be placed in time, and dropping the row would be silent."""
    as_long = f"CAST({col_sql} AS BIGINT)" if plan.ts_kind == "integral" else (
        f"unix_micros(CAST({col_sql} AS TIMESTAMP))")
    message = sql_message(null_ts(plan, side), f"CAST({key_sql} AS STRING)", "CAST(NULL AS STRING)")
    return f"CASE WHEN {col_sql} IS NULL THEN raise_error({message}) ELSE {as_long} END"


def _bucket_sql(ts: str, stats: str) -> str:
    """The key's bucket holding ts, in [0, buckets - 1], monotone in ts: all the join needs is
    that the table and the stream side place a ts alike and that a later ts never lands in an
    earlier bucket. Overflow-free for every long: outside (min_ts, max_ts) nothing is computed,
    and inside it the offset from min_ts is taken on ts shifted right by the key's `shift` (1
    where max_ts - min_ts exceeds a long), which halves it into range."""
    s = stats
    offset = f"shiftright({ts}, {s}.shift) - shiftright({s}.min_ts, {s}.shift)"
    return (f"CASE WHEN {ts} <= {s}.min_ts THEN 0 WHEN {ts} >= {s}.max_ts THEN {s}.buckets - 1 "
            f"ELSE least({s}.buckets - 1, ({offset}) div {s}.width) END")


def _stats_cte(plan: AsOfPlan, dense_ids: bool) -> str:
    """Per key: min_ts, max_ts, buckets, shift, width (and base, the first dense bucket id).

    width = (shifted span) div buckets + 1 keeps the last bucket's end past max_ts; capped one
    below the maximum long so that the + 1 cannot overflow (only one bucket spanning all of
    time reaches the cap, and there the width does not matter)."""
    v = plan.versions_per_bucket
    base = ("coalesce(sum(buckets) OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)"
            if dense_ids else "0")
    span = "shiftright(max_ts, shift) - shiftright(min_ts, shift)"
    return f"""{P}stats AS (
  SELECT k, min_ts, max_ts, buckets, shift,
         least(({span}) div buckets, {_long(LONG_MAX - 1)}) + 1 AS width, base
  FROM (SELECT k, min_ts, max_ts, buckets, {base} AS base,
               CASE WHEN try_subtract(max_ts, min_ts) IS NULL THEN 1 ELSE 0 END AS shift
        FROM (SELECT {P}k AS k, min({P}ts) AS min_ts, max({P}ts) AS max_ts,
                     (count(1) + {v - 1}) div {v} AS buckets
              FROM {P}versions GROUP BY {P}k))
)"""


def _retention_bound(plan: AsOfPlan) -> str:
    """table stream time - history retention, saturating at the minimum long (as the index's)."""
    if plan.history_retention_ms is None:
        return "CAST(NULL AS BIGINT)"
    unit = plan.time_unit
    stream_time = (f"(SELECT max({P}ts) FROM {P}versions)" if plan.table_stream_time is None
                   else _long(saturate(plan.table_stream_time * unit)))
    retention = _long(saturate(plan.history_retention_ms * unit))
    return f"coalesce(try_subtract({stream_time}, {retention}), {_long(LONG_MIN)})"


def table_ctes(plan: AsOfPlan, table_view: str, *, dense_ids: bool, broadcast_stats: bool) -> str:
    """CTEs `versions`, `stats`, `chained` and `intervals` (the bucketed validity intervals) of
    the table. Internal columns carry the reserved prefix so that no user column can shadow them.
    """
    key, ts = ident(plan.table_key), ident(plan.table_ts)
    values = "".join(f", {ident(c)}" for c in plan.value_cols)
    # An integer ts is its own long form: the output valid_from is cast back from __asof_from
    # rather than carried twice through the broadcast.
    carry_valid_from = plan.valid_from_col is not None and plan.ts_kind == "timestamp"
    valid_from = f", {ts} AS {ident(plan.valid_from_col)}" if carry_valid_from else ""
    valid_from_ref = f", v.{ident(plan.valid_from_col)}" if carry_valid_from else ""
    value_refs = "".join(f", v.{ident(c)}" for c in plan.value_cols)
    tomb = (f"coalesce({ident(plan.tombstone_col)}, false)" if plan.tombstone_col else "false")
    duplicate = sql_message(duplicate_version(plan), f"CAST(v.{P}k AS STRING)", _ts_text(f"v.{P}ts", plan))
    bucket_id = "s.base + b" if dense_ids else "b"
    hint = "/*+ BROADCAST(s) */ " if broadcast_stats else ""
    return f"""
{P}versions AS (
  SELECT {key} AS {P}k, {_ts_long(ts, key, plan, 'table')} AS {P}ts, {tomb} AS {P}tomb
         {valid_from}{values}
  FROM {table_view} WHERE {key} IS NOT NULL
),
{_stats_cte(plan, dense_ids)},
{P}chained AS (
  -- Same-ts rows sort non-tombstone first, so a duplicate is seen by a row that is kept.
  SELECT *, lead({P}ts) OVER (PARTITION BY {P}k ORDER BY {P}ts, {P}tomb) AS {P}next FROM {P}versions
),
{P}intervals AS (
  -- A tombstone ends the previous version (through {P}next) and answers nothing itself.
  SELECT {hint}v.{P}k, {bucket_id} AS {P}bucket, v.{P}ts AS {P}from,
         CASE WHEN v.{P}next = v.{P}ts THEN raise_error({duplicate}) ELSE v.{P}next END AS {P}to,
         v.{P}next IS NULL AS {P}latest, {_retention_bound(plan)} AS {P}bound{valid_from_ref}{value_refs}
  FROM {P}chained v JOIN {P}stats s ON v.{P}k = s.k
  LATERAL VIEW explode(sequence({_bucket_sql(f'v.{P}ts', 's')},
      CASE WHEN v.{P}next IS NULL THEN s.buckets - 1
      ELSE {_bucket_sql(f'v.{P}next - 1', 's')} END)) x AS b
  WHERE NOT v.{P}tomb
)"""


def join_sql(plan: AsOfPlan, stream_view: str, table_view: str, *, broadcast: bool) -> str:
    """The whole join: the table's intervals, the stream's bucket, the equi-join on (key, bucket)
    under the interval (and retention) condition."""
    hint_stats = "/*+ BROADCAST(s) */ " if broadcast else ""
    hint_table = "/*+ BROADCAST(t) */ " if broadcast else ""
    lookup = ident(plan.lookup_key)
    stream_ts = _ts_long(ident(plan.stream_ts), lookup, plan, "stream")
    bucket = f"s.base + {_bucket_sql(f'q.{P}ts', 's')}" if broadcast else _bucket_sql(f"q.{P}ts", "s")
    key_match = "" if broadcast else f"q.{P}key = t.{P}k AND "
    retention = (f" AND (t.{P}latest OR t.{P}bound IS NULL OR q.{P}ts >= t.{P}bound)"
                 if plan.history_retention_ms is not None else "")
    out = [f"q.{ident(c)}" for c in plan.stream_columns] + [f"t.{ident(c)}" for c in plan.value_cols]
    if plan.valid_from_col and plan.ts_kind == "timestamp":
        out.append(f"t.{ident(plan.valid_from_col)}")
    elif plan.valid_from_col:
        out.append(f"CAST(t.{P}from AS {plan.table_ts_type}) AS {ident(plan.valid_from_col)}")
    join = "LEFT OUTER JOIN" if plan.how == "left" else "JOIN"
    ctes = table_ctes(plan, table_view, dense_ids=broadcast, broadcast_stats=broadcast)
    return f"""WITH {ctes},
{P}probe AS (
  SELECT {hint_stats}q.*, {bucket} AS {P}bucket
  FROM (SELECT *, {lookup} AS {P}key, {stream_ts} AS {P}ts FROM {stream_view}) q
  LEFT OUTER JOIN {P}stats s ON q.{P}key = s.k
)
SELECT {hint_table}{', '.join(out)}
FROM {P}probe q {join} {P}intervals t
  ON {key_match}q.{P}bucket = t.{P}bucket AND t.{P}from <= q.{P}ts
     AND (t.{P}to IS NULL OR q.{P}ts < t.{P}to){retention}"""


def run_sql(spark: SparkSession, views: dict[str, DataFrame], build: Callable[[dict[str, str]], str]
            ) -> DataFrame:
    """spark.sql over temporary views with fresh names, dropped once the query is analysed (the
    returned DataFrame holds the analysed plan, not the view names).

    Each view is over the DataFrame plus a column dropped again, not over the DataFrame itself:
    dropping a view uncaches every cached plan that Spark finds equal to the view's (a plain
    `select("*")` counts as equal), which would silently unpersist a caller's `persist()` of the
    very DataFrame passed in. The added-and-dropped column makes the view's plan differ while
    the cached plan inside it is still found and used."""
    from pyspark.sql import functions as F

    from joins.spark.connect import is_connect

    names = {alias: f"{P}{alias}_{uuid.uuid4().hex}" for alias in views}
    tag = f"{P}view"
    frames = {alias: df.withColumn(tag, F.lit(True)).drop(tag) for alias, df in views.items()}
    if is_connect(spark):
        return _run_sql_connect(spark, frames, build(names), names)
    for alias, df in frames.items():
        df.createOrReplaceTempView(names[alias])
    try:
        return spark.sql(build(names))
    finally:
        for name in names.values():
            spark.catalog.dropTempView(name)


def _run_sql_connect(spark: SparkSession, views: dict[str, DataFrame], query: str,
                     names: dict[str, str]) -> DataFrame:
    """Spark Connect analyses a query when it runs, so a view dropped here would be gone by then:
    the DataFrames travel with the query instead (spark.sql's keyword arguments, sent as plans;
    the server makes them views for the analysis and drops them, hence the same wrapped frames)."""
    # spark.sql formats the text with str.format: braces of the query itself are escaped.
    text = query.replace("{", "{{").replace("}", "}}")
    for alias, name in names.items():
        text = text.replace(name, "{" + alias + "}")
    return spark.sql(text, **views)
