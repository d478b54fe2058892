"""`python -m joins replay FILE --engine spark` for `interval_join` scenarios.

The scenario's records are cut into micro-batches in arrival order; each batch's left rows and
left watermark records are landed in the left input table (watermark records as rows with
`_wm_key` / `_wm_ts`), the right ones in the right table, `_seq` and `_order` being the record's
arrival index, and the incremental step runs the batch (`order="arrival"`: one arrival order
for both inputs). Items come back in the reference engine's emission order (the output's
`_emit_*` / `_order_*` columns), each with `after_input` = the last index of its batch.

Columns are typed from the scenario's values: a time column (in a bound, or named by a
watermark) is a long; any other column takes the one JSON type its values have (int, float,
string, boolean); a column mixing types (or holding objects) is stored as canonical JSON text
and can only be compared as a key (`joins.sql.spark`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.core.keys import key_text
from joins.core.operator import Item
from joins.incremental import run_microbatch
from joins.microbatch import cut_batches
from joins.operators.interval_join.columns import (
    BATCH_ID,
    KIND,
    ORDER,
    REASON,
    SEQ,
    SIDE_SEQ,
    WATERMARK,
    WM_KEY,
    WM_TS,
    JoinLayout,
)
from joins.operators.interval_join.pairs import EMIT_PHASE, EMIT_POS, ORDER_BATCH, ORDER_POS, ORDER_SEQ
from joins.operators.interval_join.report import report_of
from joins.operators.interval_join.spark_incremental import IntervalJoinStep
from joins.operators.interval_join.spec import IntervalJoinRecord, IntervalJoinSpec
from joins.operators.interval_join.validate import validate_row, watermark_column
from joins.sql import SIDES, ColumnRef, Side
from joins.sql.spark import Kind

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.operators.interval_join.report import IntervalBatchReport

_SPARK_TYPE = {"long": "long", "double": "double", "string": "string", "boolean": "boolean",
               "json": "string", "null": "string"}


def validate(spec: IntervalJoinSpec, records: Sequence[IntervalJoinRecord]) -> set[ColumnRef]:
    """The reference's record checks, in arrival order; returns every watermarked column."""
    plan = spec.plan
    watermarked: set[ColumnRef] = set(plan.time_columns)
    for record in records:
        if record.watermark is not None:
            ((name, _ts),) = record.watermark.items()
            watermarked.add(watermark_column(plan.schema, record.side, name, record.i))
        else:
            assert record.row is not None
            validate_row(plan, watermarked, record.side, record.row, record.i)
    return watermarked


def infer_kinds(spec: IntervalJoinSpec, records: Sequence[IntervalJoinRecord],
                watermarked: set[ColumnRef]) -> dict[Side, dict[str, Kind]]:
    kinds: dict[Side, dict[str, Kind]] = {"left": {}, "right": {}}
    for side in SIDES:
        for name in spec.plan.schema.columns(side):
            if ColumnRef(side, name) in watermarked:
                kinds[side][name] = "long"
                continue
            seen = {_json_kind(r.row[name]) for r in records
                    if r.side == side and r.row is not None and r.row.get(name) is not None}
            # No value at all: every comparison with it is NULL, whatever the other operand.
            kinds[side][name] = seen.pop() if len(seen) == 1 else ("null" if not seen else "json")
    # Two key columns of different kinds still join where their values are the same key (an
    # int column against a column mixing ints and strings): both are stored as key text then.
    for left, right in spec.plan.equi_keys:
        pair = {kinds["left"][left.name], kinds["right"][right.name]}
        if len(pair) > 1 and "null" not in pair:
            kinds["left"][left.name] = kinds["right"][right.name] = "json"
    return kinds


def _json_kind(value: Any) -> Kind:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    return "json"


class ReplayLake:
    """The input tables and the join of one replay under `root`."""

    def __init__(self, spark: SparkSession, spec: IntervalJoinSpec, root: str,
                 records: Sequence[IntervalJoinRecord], *, create: bool = True) -> None:
        self.spark = spark
        self.spec = spec
        self.root = root.rstrip("/")
        self.records = {(r.side, r.i): r for r in records if r.row is not None}
        kinds = infer_kinds(spec, records, validate(spec, records))
        self.layout = JoinLayout.of(spec, kinds=kinds)
        self.kinds = kinds
        self.paths = {side: f"{self.root}/{side}" for side in SIDES}
        self.join_root = f"{self.root}/join"
        if create:
            for side in SIDES:
                lake.append_rows(self.spark, self.paths[side], [], self._schema(side))

    def _schema(self, side: Side) -> str:
        cols = self.layout.sides[side]
        data = ", ".join(f"`{cols.output(n)}` {_SPARK_TYPE[self.kinds[side][n]]}" for n in cols.names)
        return f"{data}, {SEQ} long, {ORDER} long, {WM_KEY} string, {WM_TS} long"

    def _rows(self, side: Side, records: Sequence[IntervalJoinRecord]) -> list[tuple[Any, ...]]:
        cols = self.layout.sides[side]
        rows = []
        for r in records:
            if r.watermark is not None:
                ((name, ts),) = r.watermark.items()
                column = self.spec.plan.schema.watermark_column(side, name)
                assert column is not None  # validated
                rows.append((*([None] * len(cols.names)), r.i, r.i, cols.inputs[column.name], ts))
            else:
                assert r.row is not None
                values = [_encode(r.row.get(n), self.kinds[side][n]) for n in cols.names]
                rows.append((*values, r.i, r.i, None, None))
        return rows

    def land(self, batch: Sequence[IntervalJoinRecord]) -> None:
        for side in SIDES:
            mine = [r for r in batch if r.side == side]
            if mine:
                lake.append_rows(self.spark, self.paths[side], self._rows(side, mine), self._schema(side))

    def step(self) -> IntervalJoinStep:
        return IntervalJoinStep(self.spec, self.layout, order="arrival")

    def run(self, **kwargs: Any) -> IntervalBatchReport:
        result = run_microbatch(self.spark, self.step(), self.join_root,
                                {"left": self.paths["left"], "right": self.paths["right"]}, **kwargs)
        return report_of(result)

    def ordered_items(self) -> list[tuple[int, Item]]:
        """(batch id, item) of every output and quarantine row in emission order."""
        out: list[tuple[tuple[int, ...], int, Item]] = []
        output = f"{self.join_root}/output"
        if lake.table_exists(output):
            for row in lake.read_delta(self.spark, output).collect():
                key = tuple(int(row[c] or 0) for c in (BATCH_ID, EMIT_POS, EMIT_PHASE, ORDER_BATCH,
                                                        ORDER_POS, ORDER_SEQ))
                out.append((key, row[BATCH_ID], self._item(row)))
        quarantine = f"{self.join_root}/quarantine"
        if lake.table_exists(quarantine):
            for row in lake.read_delta(self.spark, quarantine).collect():
                side: Side = row["side"]
                original = self.records[(side, row[SIDE_SEQ[side]])].row
                out.append(((row[BATCH_ID], row[EMIT_POS], 0, 0, 0, 0), row[BATCH_ID],
                            {"quarantined": {"side": side, "row": dict(original or {})},
                             "reason": row[REASON]}))
        out.sort(key=lambda t: t[0])
        return [(batch, item) for _key, batch, item in out]

    def _item(self, row: Any) -> Item:
        def present(side: Side, seq: int) -> dict[str, Any]:
            return self.records[(side, seq)].row or {}
        return output_item(row, self.layout, self.kinds, present)


def output_item(row: Any, layout: JoinLayout, kinds: dict[Side, dict[str, Kind]],
                present: Any = None) -> Item:
    """An output row as the reference emits it; `present(side, seq)` gives the input row,
    whose keys are the columns to show (default: all)."""
    if row[KIND] == WATERMARK:
        schema = layout.spec.plan.schema
        for side in SIDES:
            for name, column in layout.sides[side].outputs.items():
                if column == row[WM_KEY]:
                    return {"watermark": {schema.watermark_name(ColumnRef(side, name)): row[WM_TS]}}
        raise AssertionError(f"unknown watermark column {row[WM_KEY]!r}")

    def side_row(side: Side) -> dict[str, Any] | None:
        seq = row[SIDE_SEQ[side]]
        if seq is None:
            return None
        cols = layout.sides[side]
        shown = None if present is None else present(side, seq)
        return {n: _decode(row[cols.output(n)], kinds[side][n]) for n in cols.names
                if shown is None or n in shown}

    return {"row": {"l": side_row("left"), "r": side_row("right")}}


def _encode(value: Any, kind: Kind) -> Any:
    if value is None:
        return None
    if kind == "json":
        return key_text(value)
    if kind == "double":
        return float(value)
    return value


def _decode(value: Any, kind: Kind) -> Any:
    if value is None:
        return None
    return json.loads(value) if kind == "json" else value


COUNTERS = {  # reference metric -> (report field, per side)
    "late_rows_dropped": ("late_dropped", True), "late_rows_quarantined": ("late_quarantined", True),
    "rows_filtered": ("filtered", True), "rows_out_of_bounds": ("out_of_bounds", True),
    "rows_buffered": ("buffered", True), "rows_evicted": ("evicted", True),
    "null_padded_rows_emitted": ("null_padded", True), "joined_rows_emitted": ("joined_rows", False),
    "watermarks_emitted": ("watermarks_emitted", False),
}


def add_metrics(metrics: dict[str, int], report: IntervalBatchReport) -> None:
    for name, (field, per_side) in COUNTERS.items():
        value = getattr(report, field)
        metrics[name] = metrics.get(name, 0) + (sum(value.values()) if per_side else value)
    metrics["left_buffered"] = report.buffered_after["left"]
    metrics["right_buffered"] = report.buffered_after["right"]


def spark_replay(spec: IntervalJoinSpec, records: Sequence[IntervalJoinRecord],
                 batch_size: int | None, metrics: dict[str, int] | None = None) -> list[Item]:
    """Replay `records` through the incremental step, `batch_size` records a batch (None: one
    batch); items carry `after_input` = the last input index of their batch."""
    from joins.spark import get_spark

    spark = get_spark()
    counters: dict[str, int] = {}
    last_of_batch: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="tj-ij-replay-") as tmp:
        replay = ReplayLake(spark, spec, tmp, records)
        for batch in cut_batches(records, batch_size):
            replay.land(batch)
            report = replay.run()
            if report.skipped or report.batch_id is None:
                continue
            last_of_batch[report.batch_id] = batch[-1].i
            add_metrics(counters, report)
        ordered = replay.ordered_items()
    if metrics is not None:
        metrics.update(counters)
    return [{**item, "after_input": last_of_batch[batch]} for batch, item in ordered]
