"""The Spark incremental interval join (issue 12, item 2) against the reference processor.

The oracle is the record-at-a-time reference driven by the micro-batch rule (`joins.microbatch`):
same batches, same items in the same order (after_input included), same counters. Every Spark
micro-batch costs seconds here, so inputs are small and batches few.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from joins.core.operator import Item
from joins.errors import StateLimitError
from joins.microbatch import run_reference
from joins.operators.interval_join import DEFINITION, IntervalJoinProcessor, IntervalJoinSpec
from joins.operators.interval_join.spark_replay import ReplayLake, add_metrics, spark_replay
from joins.operators.interval_join.spec import IntervalJoinRecord, parse_interval_join_record
from joins.spec import parse_spec
from tests.budget import examples
from tests.reference.test_interval_join import COLUMNS, JOINS, interval_conditions
from tests.replay_command import replay

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "tests" / "scenarios").glob("003_*.json"))
# Counters the Spark report does not keep (records seen, stale watermarks).
IGNORED = {"rows_received", "watermarks_received", "stale_watermarks_ignored"}


def spec_of(condition: str, join: str, **extra: Any) -> IntervalJoinSpec:
    return parse_spec(IntervalJoinSpec, {"join": join, "condition": condition,
                                         "left_columns": list(COLUMNS),
                                         "right_columns": list(COLUMNS), **extra},
                      operator="interval_join")


def records_of(raw: Sequence[dict[str, Any]]) -> list[IntervalJoinRecord]:
    return [parse_interval_join_record({**r, "i": n}, n) for n, r in enumerate(raw)]


def cut(records: list[IntervalJoinRecord], sizes: Sequence[int]) -> list[list[IntervalJoinRecord]]:
    batches, pos = [], 0
    for size in sizes:
        if pos < len(records):
            batches.append(records[pos:pos + size])
            pos += size
    if pos < len(records):
        batches.append(records[pos:])
    return batches


def reference_items(spec: IntervalJoinSpec, batches: Sequence[Sequence[IntervalJoinRecord]],
                    metrics: dict[str, int]) -> list[Item]:
    processor = IntervalJoinProcessor(spec)
    items: list[Item] = []
    for batch in batches:
        for record in sorted(batch, key=DEFINITION.batch_phase):
            items.extend({**i, "after_input": batch[-1].i} for i in processor.process(record))
    metrics.update(processor.metrics)
    return items


def spark_items(replay: ReplayLake, batches: Sequence[Sequence[IntervalJoinRecord]],
                metrics: dict[str, int]) -> list[Item]:
    last: dict[int, int] = {}
    for batch in batches:
        replay.land(batch)
        report = replay.run()
        assert not report.skipped and report.batch_id is not None
        last[report.batch_id] = batch[-1].i
        add_metrics(metrics, report)
    return [{**item, "after_input": last[b]} for b, item in replay.ordered_items()]


def nonzero(metrics: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in metrics.items() if v and k not in IGNORED}


def assert_same(spark: Any, tmp: Path, spec: IntervalJoinSpec, raw: Sequence[dict[str, Any]],
                sizes: Sequence[int]) -> list[Item]:
    records = records_of(raw)
    batches = cut(records, sizes)
    want_m: dict[str, int] = {}
    want = reference_items(spec, batches, want_m)
    got_m: dict[str, int] = {}
    got = spark_items(ReplayLake(spark, spec, str(tmp), records), batches, got_m)
    assert got == want
    assert nonzero(got_m) == nonzero(want_m)
    return got


# ---- every shipped scenario, batch sizes 1, 2 and the whole input ------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_interval_scenario_on_spark(spark: Any, path: Path) -> None:
    from joins.scenario import load_scenario
    from joins.scenario.runner import prepare

    definition, spec, records = prepare(load_scenario(path))
    for batch_size in (1, 2, None):
        want_m: dict[str, int] = {}
        want = run_reference(definition, spec, records, batch_size or len(records), want_m)
        got_m: dict[str, int] = {}
        got = spark_replay(spec, records, batch_size, got_m)
        assert got == want, f"batch size {batch_size}"
        assert nonzero(got_m) == nonzero(want_m), f"batch size {batch_size}"


@pytest.mark.slow
def test_replay_cli_spark_passes_the_walkthrough_check_one_record_a_batch(spark: Any) -> None:
    run = replay(ROOT / "tests/scenarios/003_watermark_walkthrough.json", "spark", 1, check=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "OK 003_watermark_walkthrough" in run.stderr


# ---- random inputs, random batch splits, every join type ---------------------------------------


@st.composite
def ops(draw: st.DrawFn, in_order: bool) -> list[dict[str, Any]]:
    """Rows and watermarks of both sides; in order (each side's times never go back, a
    watermark at each row) or out of order (any time, stale watermarks)."""
    out: list[dict[str, Any]] = []
    clock = {"left": 0, "right": 0}
    for n in range(draw(st.integers(1, 16))):
        side = draw(st.sampled_from(["left", "right"]))
        if in_order:
            clock[side] += draw(st.integers(0, 3))
            t = clock[side]
        else:
            t = draw(st.integers(0, 10))
        if draw(st.integers(0, 3)) == 0:
            out.append({"side": side, "watermark": {"t": t + draw(st.integers(0, 2))}})
        else:
            out.append({"side": side, "row": {"id": f"{side[0]}{n}", "t": t,
                                              "k": draw(st.sampled_from("ab")),
                                              "v": draw(st.integers(0, 1))}})
    return out


# No shrinking: each example runs several Spark micro-batches; a failure prints its example.
@settings(max_examples=examples(8), phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(join=st.sampled_from(JOINS), condition=interval_conditions(), data=st.data(),
       in_order=st.booleans(), late=st.sampled_from(["drop", "quarantine"]))
def test_spark_equals_reference_on_random_inputs_and_batch_splits(
        spark: Any, tmp_path_factory: pytest.TempPathFactory, join: str,
        condition: tuple[str, Callable[..., bool], bool, bool], data: st.DataObject,
        in_order: bool, late: str) -> None:
    raw = data.draw(ops(in_order), label="ops")
    sizes = data.draw(st.lists(st.integers(1, 8), min_size=1, max_size=3), label="batch sizes")
    spec = spec_of(condition[0], join, late=late)
    assert_same(spark, tmp_path_factory.mktemp("prop"), spec, raw, sizes)


@pytest.mark.parametrize("join", JOINS)
def test_every_join_type_with_watermarks_inside_and_between_batches(
        spark: Any, tmp_path: Path, join: str) -> None:
    raw = [
        {"side": "left", "row": {"id": "a1", "t": 5, "k": "a", "v": 1}},
        {"side": "right", "row": {"id": "b1", "t": 6, "k": "a", "v": 1}},
        {"side": "left", "row": {"id": "a2", "t": 2, "k": "b", "v": 0}},
        {"side": "right", "watermark": {"t": 9}},      # evicts left rows with t < 7
        {"side": "left", "row": {"id": "a3", "t": 6, "k": "a", "v": 1}},   # out of bounds
        {"side": "left", "watermark": {"t": 4}},
        {"side": "right", "row": {"id": "b2", "t": 3, "k": "a", "v": 1}},  # late (r.t wm 9)
        {"side": "right", "row": {"id": "b3", "t": 12, "k": "b", "v": 1}},
        {"side": "left", "watermark": {"t": 20}},
        {"side": "right", "watermark": {"t": 30}},
    ]
    spec = spec_of("l.t BETWEEN r.t - 2 AND r.t + 2 AND l.k = r.k", join)
    got = assert_same(spark, tmp_path, spec, raw, [3, 4])
    assert any("row" in i for i in got) and any("watermark" in i for i in got)


def test_late_rows_are_quarantined_with_the_reason(spark: Any, tmp_path: Path) -> None:
    raw = [{"side": "left", "watermark": {"t": 10}},
           {"side": "left", "row": {"id": "late", "t": 9, "k": "a", "v": 1}},
           {"side": "right", "row": {"id": "r", "t": 10, "k": "a", "v": 1}}]
    got = assert_same(spark, tmp_path, spec_of("l.t = r.t", "full", late="quarantine"), raw, [3])
    assert got[0]["reason"] == ("late left row: l.t 1970-01-01T00:00:00.009Z is below its watermark "
                                "1970-01-01T00:00:00.010Z (by 1 ms)")


def test_max_buffered_rows_fails_the_batch_with_nothing_committed(spark: Any, tmp_path: Path) -> None:
    spec = spec_of("l.t BETWEEN r.t - 2 AND r.t + 2", "inner", max_buffered_rows=2)
    raw = [{"side": "left", "row": {"id": f"a{n}", "t": n, "k": "a", "v": 1}} for n in range(3)]
    records = records_of(raw)
    with pytest.raises(StateLimitError) as reference_error:
        reference_items(spec, [records], {})
    assert "max_buffered_rows=2" in str(reference_error.value)
    replay = ReplayLake(spark, spec, str(tmp_path), records)
    replay.land(records)
    for _attempt in range(2):  # a re-run of the planned batch fails the same way
        with pytest.raises(StateLimitError, match=r"the left row _seq=2 would exceed "
                                                  r"max_buffered_rows=2 .*Nothing of this batch "
                                                  r"was committed\. Raise max_buffered_rows"):
            replay.run()
    from joins import lake

    for table in ("output", "quarantine", "buffer"):
        assert not lake.table_exists(f"{replay.join_root}/{table}"), table
    # With a higher limit the same planned batch runs.
    replay.spec = spec_of("l.t BETWEEN r.t - 2 AND r.t + 2", "inner", max_buffered_rows=3)
    assert replay.run().buffered_after == {"left": 3, "right": 0}


def test_keys_of_different_json_types_never_match(spark: Any, tmp_path: Path) -> None:
    raw = [{"side": "left", "row": {"id": "a", "t": 1, "k": 1, "v": 1}},
           {"side": "right", "row": {"id": "b", "t": 1, "k": 1.0, "v": 1}},
           {"side": "right", "row": {"id": "c", "t": 1, "k": "1", "v": 1}},
           {"side": "right", "row": {"id": "d", "t": 1, "k": 1, "v": 1}}]
    got = assert_same(spark, tmp_path, spec_of("l.t BETWEEN r.t AND r.t AND l.k = r.k", "inner"), raw, [4])
    assert [json.dumps(i["row"]["r"]["id"]) for i in got if "row" in i] == ['"d"']


def test_compaction_between_batches_changes_nothing_a_batch_reads(spark: Any, tmp_path: Path) -> None:
    """The buffer rewritten with its live rows and flags folded (what runs every 50 batches)
    leaves every later batch's output as it was."""
    from joins.incremental import BatchLog, JoinRoot
    from joins.operators.interval_join.buffer import compact
    from joins.operators.interval_join.timeline import state_of

    raw = [
        {"side": "left", "row": {"id": "a1", "t": 5, "k": "a", "v": 1}},
        {"side": "left", "row": {"id": "a2", "t": 1, "k": "b", "v": 1}},
        {"side": "right", "row": {"id": "b1", "t": 20, "k": "c", "v": 1}},
        {"side": "right", "watermark": {"t": 4}},                            # evicts a2 (t < 2)
        {"side": "right", "row": {"id": "b2", "t": 6, "k": "a", "v": 1}},    # a1 used: a flag
        {"side": "left", "row": {"id": "a3", "t": 21, "k": "c", "v": 1}},
        {"side": "right", "watermark": {"t": 40}},
        {"side": "left", "watermark": {"t": 40}},
    ]
    spec = spec_of("l.t BETWEEN r.t - 2 AND r.t + 2 AND l.k = r.k", "full")
    records = records_of(raw)
    batches = cut(records, [2, 3])
    want = reference_items(spec, batches, {})
    replay = ReplayLake(spark, spec, str(tmp_path), records)
    last: dict[int, int] = {}
    for n, batch in enumerate(batches):
        if n == 2:
            done = BatchLog(f"{replay.join_root}/checkpoints", "interval_join").tail().last_done
            assert done is not None
            state = state_of(done.carry, spec.plan)
            floors = {c: f for c in state.wm_state if (f := state.lower_bound(c)) is not None}
            compact(spark, JoinRoot(replay.join_root), replay.layout, floors)
            from joins import lake

            kinds = [r["_entry"] for r in lake.read_delta(spark, f"{replay.join_root}/buffer").collect()]
            assert kinds and set(kinds) == {"row"}  # flags folded, evicted rows gone
        replay.land(batch)
        report = replay.run()
        last[report.batch_id] = batch[-1].i
    got = [{**item, "after_input": last[b]} for b, item in replay.ordered_items()]
    assert got == want


@pytest.mark.parametrize("limit", [0, 10**6], ids=["cached", "checkpointed"])
def test_a_batch_is_the_same_whether_its_rows_are_cached_or_checkpointed(
        spark: Any, limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scenarios' batches are all small (checkpointed, the rows that joined shipped to every
    # task); a batch above the limits caches its classified rows and shuffles the rows that
    # joined with the null-padding anti joins instead: both must give the reference's items.
    from joins.operators.interval_join import pairs
    from joins.scenario import load_scenario
    from joins.scenario.runner import prepare
    from joins.spark import frames

    monkeypatch.setattr(frames, "CHECKPOINT_MAX_ROWS", limit)
    monkeypatch.setattr(pairs, "FEW_ROWS", limit)
    definition, spec, records = prepare(load_scenario(ROOT / "tests/scenarios/003_join_full.json"))
    for batch_size in (3, None):
        want_m: dict[str, int] = {}
        want = run_reference(definition, spec, records, batch_size or len(records), want_m)
        got_m: dict[str, int] = {}
        assert spark_replay(spec, records, batch_size, got_m) == want, f"batch size {batch_size}"
        assert nonzero(got_m) == nonzero(want_m)


def test_a_released_checkpoint_frees_its_blocks(spark: Any) -> None:
    from joins.spark.frames import checkpointed, release_checkpoint

    def persisted() -> set[int]:
        return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs().keySet()}

    frame = checkpointed(spark.range(10))
    held = int(frame._jdf.queryExecution().analyzed().rdd().id())
    assert held in persisted()
    release_checkpoint(frame)
    assert held not in persisted()
