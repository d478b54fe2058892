"""The interval join as pipelines run it (issue 12, item 2): derived watermarks (max event time
seen - allowed lag, after each batch), the left-first batch rule, and multi-way joins (a join's
output, rows and watermarks, is the left input of another), against the reference processor
fed the same records in the same order."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from joins import lake
from joins.core.operator import Item
from joins.incremental import run_microbatch
from joins.operators.interval_join import IntervalJoinProcessor, IntervalJoinSpec
from joins.operators.interval_join.columns import JoinLayout
from joins.operators.interval_join.report import report_of
from joins.operators.interval_join.spark_incremental import IntervalJoinStep
from joins.operators.interval_join.spark_replay import output_item
from joins.operators.interval_join.spec import parse_interval_join_record
from joins.spec import parse_spec
from tests.budget import examples
from tests.reference.test_interval_join import JOINS, interval_conditions

pytestmark = pytest.mark.spark

Row = dict[str, Any]


def spec_of(condition: str, join: str, left: Sequence[str], right: Sequence[str]) -> IntervalJoinSpec:
    return parse_spec(IntervalJoinSpec, {"join": join, "condition": condition,
                                         "left_columns": list(left), "right_columns": list(right)},
                      operator="interval_join")


class EventTables:
    """Two events tables (columns by output name, `_seq`) and a join reading them."""

    def __init__(self, spark: Any, root: Path, spec: IntervalJoinSpec, types: dict[str, str],
                 lag: dict[str, int | None], left_path: str | None = None) -> None:
        self.spark, self.spec = spark, spec
        self.layout = JoinLayout.of(spec)
        self.types = types
        self.paths = {"left": left_path or str(root / "left"), "right": str(root / "right")}
        self.root = str(root / "join")
        self.step = IntervalJoinStep(spec, self.layout, lag_ms=lag, order="left_first")  # type: ignore[arg-type]
        self.seq = {"left": 0, "right": 0}
        for side in ("left", "right"):
            if side == "left" and left_path is not None:
                continue
            lake.write_delta(self._frame(side, []), self.paths[side], mode="append")

    def _frame(self, side: str, rows: list[Row]) -> Any:
        cols = self.layout.sides[side]  # type: ignore[index]
        schema = ", ".join(f"{cols.output(n)} {self.types[n]}" for n in cols.names) + ", _seq long"
        data = []
        for r in rows:
            data.append((*(r.get(n) for n in cols.names), self.seq[side]))
            self.seq[side] += 1
        return self.spark.createDataFrame(data, schema)

    def land(self, side: str, rows: list[Row]) -> None:
        if rows:
            lake.write_delta(self._frame(side, rows), self.paths[side], mode="append")

    def run(self) -> Any:
        return report_of(run_microbatch(self.spark, self.step, self.root, self.paths))

    def items(self, batch_id: int) -> list[Item]:
        """The batch's output in emission order, as reference items."""
        kinds = {s: {n: "long" if self.types[n] == "long" else "string"
                     for n in self.layout.sides[s].names} for s in ("left", "right")}
        path = f"{self.root}/output"
        if not lake.table_exists(path):
            return []
        rows = [r for r in lake.read_delta(self.spark, path).collect() if r["batch_id"] == batch_id]
        rows.sort(key=lambda r: tuple(int(r[c] or 0) for c in (
            "_emit_pos", "_emit_phase", "_order_batch", "_order_pos", "_order_seq")))
        return [output_item(r, self.layout, kinds) for r in rows]  # type: ignore[arg-type]


def reference_batch(processor: IntervalJoinProcessor, lefts: list[Row], rights: list[Row],
                    lag: dict[str, int | None], seen: dict[tuple[str, str], int],
                    time_columns: dict[str, list[str]]) -> list[Item]:
    """One batch by the pipeline rule: left rows, right rows, then each lagged side's derived
    watermark per time column (max seen - lag)."""
    out: list[Item] = []
    i = 0

    def send(raw: dict[str, Any]) -> None:
        nonlocal i
        out.extend(processor.process(parse_interval_join_record({**raw, "i": i}, i)))
        i += 1

    for side, rows in (("left", lefts), ("right", rights)):
        for row in rows:
            send({"side": side, "row": row})
            for column in time_columns[side]:
                seen[(side, column)] = max(seen.get((side, column), row[column]), row[column])
    for side in ("left", "right"):
        if lag[side] is None:
            continue
        for column in time_columns[side]:
            if (side, column) in seen:
                send({"side": side, "watermark": {column: seen[(side, column)] - lag[side]}})
    return out


@st.composite
def side_batches(draw: st.DrawFn, n_batches: int, prefix: str) -> list[list[Row]]:
    return [[{"id": f"{prefix}{b}-{n}", "t": draw(st.integers(0, 14)), "k": draw(st.sampled_from("ab")),
              "v": draw(st.integers(0, 1))} for n in range(draw(st.integers(0, 4)))]
            for b in range(n_batches)]


COLUMNS = ("id", "t", "k", "v")
TYPES = {"id": "string", "t": "long", "k": "string", "v": "long"}


@settings(max_examples=examples(8), phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(join=st.sampled_from(JOINS), condition=interval_conditions(), data=st.data(),
       lags=st.tuples(st.integers(0, 4), st.integers(0, 4)))
def test_derived_watermarks_and_left_first_batches_equal_the_reference(
        spark: Any, tmp_path_factory: pytest.TempPathFactory, join: str,
        condition: tuple[str, Callable[..., bool], bool, bool], data: st.DataObject,
        lags: tuple[int, int]) -> None:
    spec = spec_of(condition[0], join, COLUMNS, COLUMNS)
    n = data.draw(st.integers(1, 3), label="batches")
    lefts = data.draw(side_batches(n, "a"), label="left")
    rights = data.draw(side_batches(n, "b"), label="right")
    lag = {"left": lags[0], "right": lags[1]}
    tables = EventTables(spark, tmp_path_factory.mktemp("pipe"), spec, TYPES, lag)
    processor = IntervalJoinProcessor(spec)
    seen: dict[tuple[str, str], int] = {}
    for b in range(n):
        want = reference_batch(processor, lefts[b], rights[b], lag, seen,
                               {"left": ["t"], "right": ["t"]})
        tables.land("left", lefts[b])
        tables.land("right", rights[b])
        report = tables.run()
        if report.skipped:
            assert not lefts[b] and not rights[b] and not want
            continue
        assert tables.items(report.batch_id) == want, f"batch {b}"


def test_three_streams_one_join_output_feeding_another(spark: Any, tmp_path: Path) -> None:
    """orders o JOIN deliveries d ON d.time BETWEEN o.time - 1 AND o.time + 3, JOIN returns r
    ON r.time BETWEEN d.time - 1 AND d.time + 4 (seed 003's plan): join1's output table (rows
    and output watermarks) is join2's left input; join2 equals the reference chain."""
    rng = random.Random(5)
    spec1 = spec_of("d.time BETWEEN o.time - 1 AND o.time + 3", "inner", ("o.id", "o.time"),
                    ("d.id", "d.time"))
    spec2 = spec_of("r.time BETWEEN d.time - 1 AND d.time + 4", "inner",
                    ("o.id", "o.time", "d.id", "d.time"), ("r.id", "r.time"))
    types = {"o.id": "string", "o.time": "long", "d.id": "string", "d.time": "long",
             "r.id": "string", "r.time": "long"}
    lag = {"left": 2, "right": 2}
    join1 = EventTables(spark, tmp_path / "j1", spec1, types, lag)
    join2 = EventTables(spark, tmp_path / "j2", spec2, types, {"left": None, "right": 2},
                        left_path=f"{join1.root}/output")
    ref1, ref2 = IntervalJoinProcessor(spec1), IntervalJoinProcessor(spec2)
    seen1: dict[tuple[str, str], int] = {}
    seen2: dict[tuple[str, str], int] = {}
    clock = 0
    rows_out = 0
    for b in range(4):
        orders = [{"o.id": f"o{b}{n}", "o.time": clock + rng.randrange(8)} for n in range(4)]
        deliveries = [{"d.id": f"d{b}{n}", "d.time": clock + rng.randrange(8)} for n in range(4)]
        returns = [{"r.id": f"r{b}{n}", "r.time": clock + rng.randrange(10)} for n in range(4)]
        clock += 8
        join1.land("left", orders)
        join1.land("right", deliveries)
        join2.land("right", returns)
        r1 = join1.run()
        out1 = reference_batch(ref1, orders, deliveries, lag, seen1,
                               {"left": ["o.time"], "right": ["d.time"]})
        assert tables_rows(join1.items(r1.batch_id)) == tables_rows(out1)
        r2 = join2.run()
        # join2's left input: join1's items in emission order (rows merged, watermarks), then
        # the returns, then the returns' derived watermark.
        want: list[Item] = []
        for i, item in enumerate(out1):
            raw = ({"side": "left", "row": {**item["row"]["l"], **item["row"]["r"]}}
                   if "row" in item else {"side": "left", "watermark": item["watermark"]})
            want.extend(ref2.process(parse_interval_join_record({**raw, "i": i}, i)))
        want.extend(reference_batch(ref2, [], returns, {"left": None, "right": 2}, seen2,
                                    {"left": [], "right": ["r.time"]}))
        got = join2.items(r2.batch_id)
        assert tables_rows(got) == tables_rows(want), f"batch {b}"
        assert [g for g in got if "watermark" in g] == [w for w in want if "watermark" in w]
        rows_out += r2.rows_out
    assert rows_out > 3  # the chain joined something
    assert ref2.metrics["late_rows_dropped"] == 0


def tables_rows(items: list[Item]) -> Counter[str]:
    return Counter(json.dumps(i, sort_keys=True) for i in items)
