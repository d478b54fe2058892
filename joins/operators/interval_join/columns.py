"""Column names of the interval join's Spark tables, and the condition compiled onto them.

Each input row's columns get the name they have in the output: the column's watermark name
(`joins.sql.columns.Schema.watermark_name`: the config's name, side-qualified as `l.x` / `r.x`
where both inputs list it) with dots turned into underscores, so `o.time` is `o_time` and the
two `time` columns of `l.time = r.time` are `l_time` and `r_time`. A join's output feeding
another join keeps those names: the downstream join lists them as its columns.

Lineage columns start with an underscore:

- inputs: `_seq` (a row's identity in its input, unique per side), `_order` (arrival order;
  `_seq` when the input has none), `_wm_key` / `_wm_ts` (a watermark record instead of a row:
  the name of the column it is for, and its value);
- output: `_kind` (`joined`, `left` / `right` for a null-padded row, `watermark`), `_l_seq` /
  `_r_seq` (the rows joined), `_seq` (the output row's identity, a hash of those), `_order`
  (emission order: what a downstream join reads as arrival order), `_wm_key` / `_wm_ts`,
  `batch_id`, `_emit_pos` / `_emit_phase` / `_order_batch` / `_order_pos` (where in its batch
  the reference engine emits the row, for the replay), `event_date`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from joins.errors import ConfigError
from joins.sql import SIDES, ColumnRef, Side
from joins.sql.spark import Kind, compile_spark, spark_kind

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructType

    from joins.operators.interval_join.spec import IntervalJoinSpec

SEQ, ORDER, WM_KEY, WM_TS = "_seq", "_order", "_wm_key", "_wm_ts"
KIND, L_SEQ, R_SEQ, BATCH_ID, EVENT_DATE = "_kind", "_l_seq", "_r_seq", "batch_id", "event_date"
EMIT_POS, EMIT_PHASE, ORDER_BATCH, ORDER_POS = "_emit_pos", "_emit_phase", "_order_batch", "_order_pos"
JOINED, WATERMARK = "joined", "watermark"
REASON = "reason"
SIDE_SEQ: dict[Side, str] = {"left": L_SEQ, "right": R_SEQ}


def physical(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class SideColumns:
    """One input's columns: config name -> column in the input table -> column in the output."""

    side: Side
    names: tuple[str, ...]                 # config order (left_columns / right_columns)
    inputs: dict[str, str]                 # config name -> input table column
    outputs: dict[str, str]                # config name -> output column
    kinds: dict[str, Kind] = field(default_factory=dict)

    def output(self, name: str) -> str:
        return self.outputs[name]

    def output_names(self) -> list[str]:
        return [self.outputs[n] for n in self.names]


@dataclass(frozen=True)
class JoinLayout:
    """Both inputs' columns and everything derived from them for one spec."""

    spec: IntervalJoinSpec
    sides: dict[Side, SideColumns]

    @classmethod
    def of(cls, spec: IntervalJoinSpec, *, inputs: Mapping[Side, Mapping[str, str]] | None = None,
           kinds: Mapping[Side, Mapping[str, Kind]] | None = None) -> JoinLayout:
        """`inputs`: per side, config name -> input column (default: the output name)."""
        schema = spec.plan.schema
        sides: dict[Side, SideColumns] = {}
        seen: dict[str, str] = {}
        for side in SIDES:
            names = schema.columns(side)
            outputs = {n: physical(schema.watermark_name(ColumnRef(side, n))) for n in names}
            for name, out in outputs.items():
                if out.startswith("_") or out in (BATCH_ID, EVENT_DATE, REASON):
                    raise ConfigError(f"interval_join: {side}_columns: column {name!r} would be "
                                      f"called {out!r} in the output, a name the join uses itself")
                if out in seen:
                    raise ConfigError(f"interval_join: columns {seen[out]!r} and {name!r} would "
                                      f"both be called {out!r} in the output; rename one")
                seen[out] = name
            given = dict((inputs or {}).get(side, {}))
            sides[side] = SideColumns(side, names, {n: given.get(n, outputs[n]) for n in names},
                                      outputs, dict((kinds or {}).get(side, {})))
        return cls(spec, sides)

    def ref(self, ref: ColumnRef) -> str:
        return self.sides[ref.side].output(ref.name)

    def output_columns(self) -> list[str]:
        return [*self.sides["left"].output_names(), *self.sides["right"].output_names()]

    def with_kinds(self, side: Side, schema: StructType) -> JoinLayout:
        """Kinds of a side's columns from its input schema, where not given already."""
        cols = self.sides[side]
        kinds = dict(cols.kinds)
        for name in cols.names:
            column = cols.inputs[name]
            if name not in kinds and column in schema.fieldNames():
                kinds[name] = _kind_or_none(schema[column].dataType.simpleString())
        sides = dict(self.sides)
        sides[side] = SideColumns(side, cols.names, cols.inputs, cols.outputs, kinds)
        return JoinLayout(self.spec, sides)

    def time_columns(self, side: Side) -> list[ColumnRef]:
        """The columns of `side` in a time bound, config order."""
        return [c for c in self.spec.plan.time_columns if c.side == side]

    def bounded_columns(self, side: Side) -> list[ColumnRef]:
        """The columns of `side` with a lower bound (the bounded side of some time bound)."""
        bounded = {b.bounded for b in self.spec.plan.bounds}
        return [c for c in self.time_columns(side) if c in bounded]

    def column_of(self, ref: ColumnRef) -> tuple[Column, Kind]:
        from pyspark.sql import functions as F

        kind = self.sides[ref.side].kinds.get(ref.name)
        if kind is None:
            raise ConfigError(f"interval_join: the {ref.side} input has no usable column for "
                              f"{ref.name!r} (every column in the condition needs a number, "
                              f"string or boolean type)")
        return F.col(self.ref(ref)), kind

    def condition(self) -> Column:
        plan = self.spec.plan
        assert plan.parsed is not None and plan.resolve is not None
        return compile_spark(plan.parsed, plan.resolve, self.column_of)

    def filter(self, side: Side) -> Column | None:
        plan = self.spec.plan
        assert plan.resolve is not None
        for s, part in plan.filter_parts:
            if s == side:
                return compile_spark(part, plan.resolve, self.column_of)
        return None

    def join_keys(self) -> list[tuple[str, str]]:
        """Equi-join key columns (left output, right output) whose kinds match: a pair of
        different kinds never matches (the key rule), so it is left to the condition."""
        out = []
        for left, right in self.spec.plan.equi_keys:
            lk = self.sides["left"].kinds.get(left.name)
            rk = self.sides["right"].kinds.get(right.name)
            if lk is not None and lk == rk:
                out.append((self.ref(left), self.ref(right)))
        return out


def _kind_or_none(type_name: str) -> Kind:
    try:
        return spark_kind(type_name)
    except ConfigError:
        return "json"  # usable as a key only (canonical JSON text, or a nested value)


def rename_side(columns: SideColumns, extra: Sequence[str] = ()) -> list[Column]:
    """Select list turning an input table's columns into output names (plus `extra` as is)."""
    from pyspark.sql import functions as F

    return [*(F.col(columns.inputs[n]).alias(columns.outputs[n]) for n in columns.names),
            *(F.col(c) for c in extra)]
