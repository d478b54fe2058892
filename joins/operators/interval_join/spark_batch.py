"""The batch form of the interval join: two DataFrames in, every pair for which the condition is
TRUE out, plus each unmatched row of an outer side null-padded (Spark's outer join when one side
is outer, an anti join per side when both are).

This is what the stream form computes once every row has arrived and no row was late: the
nested loop over both inputs filtered by the whole condition. Pairs are found by equality keys
plus time bins (`bins.py`), so a hot key spreads over as many tasks as its time range has bins.
Used by backfills (`backfill.py`) and measured by `bench/interval_join.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from joins.errors import ConfigError
from joins.operators.interval_join.bins import candidate_pairs, time_window
from joins.operators.interval_join.columns import (
    JOINED,
    KIND,
    L_SEQ,
    R_SEQ,
    JoinLayout,
    SideColumns,
    rename_side,
)
from joins.operators.interval_join.sweep import PAIRED, sweep_key, sweep_pairs, sweep_runs
from joins.sql import Side

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from joins.operators.interval_join.spec import IntervalJoinSpec
    from joins.sql.spark import Kind


@dataclass(frozen=True)
class BatchJoin:
    """The join's rows (output columns, `_kind`, `_l_seq`, `_r_seq`) and what to release when
    they have been read (an outer join reads its pairs twice, so they are cached)."""

    rows: DataFrame
    layout: JoinLayout
    release: Callable[[], None] = lambda: None


def side_rows(frame: DataFrame, columns: SideColumns, id_col: str | None, seq: str) -> DataFrame:
    """A side's rows under their output names, with `seq` the row's identity."""
    from pyspark.sql import functions as F

    missing = [c for c in columns.inputs.values() if c not in frame.columns]
    if missing:
        raise ConfigError(f"interval_join: the {columns.side} input has no column(s) {missing} "
                          f"(has {frame.columns})")
    ident = F.monotonically_increasing_id() if id_col is None else F.col(id_col)
    return frame.select(*rename_side(columns), ident.cast("long").alias(seq))


def null_padded(rows: DataFrame, layout: JoinLayout, side: Side) -> DataFrame:
    """`rows` of one side (output names + its `_l_seq` / `_r_seq`) as output rows."""
    from pyspark.sql import functions as F

    other = "right" if side == "left" else "left"
    kinds = {"left": layout.sides["left"], "right": layout.sides["right"]}
    nulls = [F.lit(None).cast(_spark_type(kinds[other].kinds.get(n))).alias(kinds[other].output(n))
             for n in kinds[other].names]
    seq_other = F.lit(None).cast("long").alias(R_SEQ if side == "left" else L_SEQ)
    return rows.select("*", *nulls, seq_other, F.lit(side).alias(KIND))


def _spark_type(kind: Kind | None) -> str:
    return {"long": "long", "double": "double", "boolean": "boolean"}.get(kind or "", "string")


def interval_join(left: DataFrame, right: DataFrame, spec: IntervalJoinSpec, *,
                  left_columns: Mapping[str, str] | None = None,
                  right_columns: Mapping[str, str] | None = None,
                  left_id: str | None = None, right_id: str | None = None,
                  bin_ms: int | None = None,
                  replicate: Literal["left", "right"] = "right", sweep: bool = True) -> BatchJoin:
    """The interval join of `left` and `right` under `spec` (condition, join type).

    left_columns / right_columns: config column name -> frame column (default: the name with
        dots as underscores, `o.time` -> `o_time`, or the name itself when the frame has it).
    left_id / right_id: a unique id column per side (`_l_seq` / `_r_seq` of the output);
        without one each row gets `monotonically_increasing_id` and the side is checkpointed,
        so that pairs and unmatched rows agree on the ids.
    bin_ms: the time bin width (default: the bounds' window a + b).
    replicate: the side copied into the bins its window reaches, for an inner or full join; a
        left or right join replicates the side it does not keep.
    sweep: False takes Spark's hash join where the sweep could run (sweep.py), to compare them.
    """
    layout = JoinLayout.of(spec, inputs={"left": _inputs(spec, "left", left, left_columns),
                                         "right": _inputs(spec, "right", right, right_columns)})
    layout = layout.with_kinds("left", left.schema).with_kinds("right", right.schema)
    lrows = side_rows(left, layout.sides["left"], left_id, L_SEQ)
    rrows = side_rows(right, layout.sides["right"], right_id, R_SEQ)
    if left_id is None:
        lrows = lrows.localCheckpoint()
    if right_id is None:
        rrows = rrows.localCheckpoint()
    outer = spec.outer_sides
    lf, rf = _filtered(lrows, layout.filter("left")), _filtered(rrows, layout.filter("right"))
    columns = [*layout.output_columns(), L_SEQ, R_SEQ, KIND]
    keys, window, condition = layout.join_keys(), time_window(layout, bin_ms), layout.condition()
    from pyspark.sql import functions as F

    rows: dict[Side, DataFrame] = {"left": lrows, "right": rrows}
    filtered: dict[Side, DataFrame] = {"left": lf, "right": rf}

    def keeping(side: Side, how: Literal["outer", "anti"], marker: str | None = None) -> DataFrame:
        # Every row of the kept side, binned once per row (so the other side is the replicated
        # one), against the other side's filtered rows. The kept side's filter-failing rows are
        # in: the whole condition (which holds the filters) is the join's, so they match nothing.
        other: Side = "right" if side == "left" else "left"
        frames = {side: rows[side], other: filtered[other]}
        if marker is not None:
            frames[other] = frames[other].withColumn(marker, F.lit(True))
        return candidate_pairs(frames["left"], frames["right"], keys=keys, window=window,
                               condition=condition, replicate=other, how=f"{side}_{how}")

    key = sweep_key(layout, window) if sweep and len(outer) < 2 and sweep_runs(left) else None
    if key is not None and window is not None:
        # One integral key and one window, nothing else: a sweep of each (key, bin) group
        # sorted by time finds exactly the pairs (sweep.py), padding the outer side's rows.
        kept: Side | None = next(iter(outer), None)
        stream: Side = kept or ("right" if replicate == "left" else "left")
        pairs = sweep_pairs(lrows, rrows, key, window, stream=stream, outer=kept is not None)
        kind = F.lit(JOINED) if kept is None else \
            F.when(F.col(PAIRED), F.lit(JOINED)).otherwise(F.lit(kept))
        return BatchJoin(pairs.withColumn(KIND, kind).select(*columns), layout)
    if len(outer) == 1:
        # One outer side: Spark's own outer join pads the rows that match nothing, in the same
        # pass that finds the pairs.
        (side,) = outer
        hit = "_hit"
        kind = F.when(F.col(hit).isNull(), F.lit(side)).otherwise(F.lit(JOINED))
        return BatchJoin(keeping(side, "outer", hit).withColumn(KIND, kind).select(*columns),
                         layout)
    pairs = candidate_pairs(lf, rf, keys=keys, window=window, condition=condition,
                            replicate=replicate)
    out = pairs.withColumn(KIND, F.lit(JOINED)).select(*columns)
    for side in sorted(outer):
        # Both sides outer: each side's unmatched rows by an anti join, rather than keeping
        # every pair to look up which rows matched.
        out = out.unionByName(null_padded(keeping(side, "anti"), layout, side).select(*columns))
    return BatchJoin(out, layout)


def _filtered(rows: DataFrame, condition: Column | None) -> DataFrame:
    return rows if condition is None else rows.where(condition)


def _inputs(spec: IntervalJoinSpec, side: Side, frame: DataFrame,
            given: Mapping[str, str] | None) -> dict[str, str]:
    from joins.operators.interval_join.columns import physical

    if given is not None:
        return dict(given)
    names = spec.plan.schema.columns(side)
    return {n: n if n in frame.columns else physical(n) for n in names}
