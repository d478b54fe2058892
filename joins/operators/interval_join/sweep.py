"""The batch form's pairs by a sweep (temporaljoins.IntervalSweep), for the commonest condition:
one integral equi-join key and one time window, nothing else (`l.k = r.k AND r.t BETWEEN
l.t - a AND l.t + b`).

The rows are binned as `bins.candidate_pairs` bins them (the stream side in its own bin, the
build side in every bin its window reaches) and shuffled alike on (key, bin); each task then
finds a stream row's pairs by a binary search in its group's build rows sorted by time, instead
of Spark's hash join comparing every row of the group and filtering by the window (half of them
outside it when the bins are as wide as the window). Other conditions, Spark Connect and sessions
without the engine's jar take `candidate_pairs`; both give the same rows (tests/spark/
test_interval_sweep.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from joins.operators.interval_join.bins import TimeWindow
from joins.sql import Side
from joins.sql.columns import other_side
from joins.sql.parse import conjuncts
from joins.sql.plan import equi_key_of
from joins.sql.time_bounds import comparisons, linearize

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from joins.operators.interval_join.columns import JoinLayout

KEY, BIN, TS = "_sweep_key", "_sweep_bin", "_sweep_ts"
PAIRED = "_sweep_paired"


def sweep_runs(frame: DataFrame) -> bool:
    """Whether `frame`'s session runs the sweep: a classic session with the engine's jar."""
    from joins.spark import jvm

    return jvm.unavailable_reason(frame.sparkSession) is None


def sweep_key(layout: JoinLayout, window: TimeWindow | None) -> tuple[str, str] | None:
    """The condition's key columns (left, right) if it is exactly one integral key equality plus
    comparisons of the window's two integral time columns (any mix of BETWEEN and inequalities,
    which together say `left - right` in [-a, b]); None for anything else (a filter, a second
    key, a string key, another time column, an OR)."""
    plan = layout.spec.plan
    if window is None or plan.parsed is None or plan.resolve is None or plan.filter_parts:
        return None
    if len(plan.equi_keys) != 1 or len(layout.join_keys()) != 1:
        return None
    key = plan.equi_keys[0]
    times = {c for b in plan.bounds for c in (b.bounded, b.reference)
             if layout.ref(c) in (window.left, window.right)}
    if len(times) != 2 or any(layout.sides[c.side].kinds.get(c.name) != "long"
                              for c in (*key, *times)):
        return None
    for conjunct in conjuncts(plan.parsed):
        if equi_key_of(conjunct, plan.resolve) == key:
            continue
        parts = comparisons(conjunct)
        if not parts:
            return None
        for a, b, _ in parts:
            la, lb = linearize(a, plan.resolve), linearize(b, plan.resolve)
            if la is None or lb is None:
                return None
            terms = la.plus(lb, -1).terms
            if {c for c, _ in terms} != times or sorted(k for _, k in terms) != [-1, 1]:
                return None
    return layout.join_keys()[0]


def sweep_pairs(left: DataFrame, right: DataFrame, key: tuple[str, str], window: TimeWindow, *,
                stream: Side, outer: bool) -> DataFrame:
    """Every (left, right) pair the condition holds for, as one row of both frames' columns and
    PAIRED (true); with `outer`, the `stream` side's rows that pair with nothing too, the other
    side null and PAIRED false.
    The stream side is binned once per row, the other copied into the bins its window reaches."""
    from pyspark.sql import DataFrame as Frame
    from pyspark.sql import functions as F

    from joins.spark.names import jvm_class

    spark = left.sparkSession
    w = window
    build = other_side(stream)
    keys = {"left": key[0], "right": key[1]}
    times = {"left": w.left, "right": w.right}
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "8")

    def staged(side: Side, frame: DataFrame) -> tuple[DataFrame, list[str]]:
        """The side's rows with their bin, shuffled on (key, bin); the key, bin and time
        columns' names. A key or time of a narrower integral type gets a long copy (the sweep
        reads longs); every column more is bytes more in the shuffle and in the task's arena."""
        p = f"_{side[0]}"
        extra, names = [], []
        for column, helper in ((keys[side], p + KEY), (times[side], p + TS)):
            if dict(frame.dtypes)[column] == "bigint":
                names.append(column)
            else:
                extra.append(F.col(column).cast("long").alias(helper))
                names.append(helper)
        bins = w.single_bin(side) if side == stream else w.replicated_bins(side)
        staged = frame.select("*", *extra, bins.alias(p + BIN))
        return staged.repartition(partitions, names[0], p + BIN), [names[0], p + BIN, names[1]]

    frames = {"left": left, "right": right}
    (s, sc), (b, bc) = staged(stream, frames[stream]), staged(build, frames[build])
    # `left - right` in [-a, b]: a right row's time in [left - b, left + a], a left row's in
    # [right - a, right + b].
    lower, upper = (-w.b, w.a) if stream == "left" else (-w.a, w.b)
    cls = jvm_class(spark._jvm, "temporaljoins.IntervalSweep")  # type: ignore[attr-defined]
    jdf = cls.join(s._jdf, b._jdf, *(s.columns.index(c) for c in sc),
                   *(b.columns.index(c) for c in bc), lower, upper, outer)
    # Drop ignores the helpers a side did not need (its key and time were longs already).
    helpers = [p + c for p in ("_l", "_r") for c in (KEY, BIN, TS)]
    # A build row always has its bin; a padded row's build side is all null.
    out = Frame(jdf, spark).withColumn(PAIRED, F.col(f"_{build[0]}{BIN}").isNotNull())
    return out.drop(*helpers)
