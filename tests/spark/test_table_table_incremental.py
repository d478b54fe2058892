"""The Spark table-table join (issue 10, item 2) against the reference engine.

The oracle is the record-at-a-time reference processor driven by the micro-batch rule (both
sides' updates of a batch in arrival order, the output compacted to the last result per key):
same batches, same items in the same order, same counters. Every Spark micro-batch costs about
a second here, so inputs are small and batches few.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins import lake
from joins.core.operator import Item
from joins.microbatch import run_reference
from joins.operators.table_table_join import DEFINITION
from joins.operators.table_table_join.spark_replay import ReplayLake, spark_replay
from joins.operators.table_table_join.spec import TableTableJoinRecord, TableTableJoinSpec
from tests.budget import spark_examples
from tests.spark import operator_helpers as helpers
from tests.spark.codegen import generated_code
from tests.spark.operator_helpers import cut, nonzero, scenarios_of

pytestmark = pytest.mark.spark

# ---- helpers shared with the crash and history tests ----------------------------------------


def spec_of(config: dict[str, Any]) -> TableTableJoinSpec:
    return TableTableJoinSpec.model_validate(config)


def records_of(raw: Sequence[dict[str, Any]], start: int = 0) -> list[TableTableJoinRecord]:
    return helpers.records_of(DEFINITION, raw, start)


def reference_items(spec: TableTableJoinSpec, batches: Sequence[Sequence[TableTableJoinRecord]],
                    metrics: dict[str, int] | None = None) -> list[Item]:
    return helpers.reference_items(DEFINITION, spec, batches, metrics)


def spark_items(replay: ReplayLake, batches: Sequence[Sequence[TableTableJoinRecord]],
                metrics: dict[str, int] | None = None) -> list[Item]:
    last: dict[int, int] = {}
    counters = {"out_of_order_ignored": 0, "expired": 0}
    for batch in batches:
        replay.land(batch)
        report = replay.run()
        assert report.batch_id is not None
        last[report.batch_id] = batch[-1].i
        counters["out_of_order_ignored"] += sum(report.out_of_order_ignored.values())
        counters["expired"] += sum(report.expired.values())
    if metrics is not None:
        metrics.update(counters)
    return [{**item, "after_input": last[bid]} for bid, _seq, item in replay.ordered_rows()]


def assert_same_as_reference(spark: Any, tmp_path: Path, config: dict[str, Any],
                             raw: Sequence[dict[str, Any]], cuts: Sequence[int]) -> list[Item]:
    spec = spec_of(config)
    batches = cut(records_of(raw), cuts)
    want_metrics: dict[str, int] = {}
    want = reference_items(spec, batches, want_metrics)
    got_metrics: dict[str, int] = {}
    got = spark_items(ReplayLake(spark, spec, str(tmp_path)), batches, got_metrics)
    assert got == want
    assert nonzero(got_metrics) == nonzero(want_metrics)
    return got


def versioned(retention: int) -> dict[str, Any]:
    return {"versioned": True, "history_retention_ms": retention}


UNVERSIONED = {"versioned": False}


# ---- every shipped scenario ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("path", scenarios_of("table_table_join"), ids=lambda p: p.stem)
def test_every_table_table_scenario_on_spark(spark: Any, path: Path) -> None:
    """Batch sizes 1, 2 and the whole input: the Spark engine equals the reference engine with
    the same batches (items in order and counters)."""
    from joins.scenario import load_scenario
    from joins.scenario.runner import prepare

    definition, spec, records = prepare(load_scenario(path))
    for batch_size in (1, 2, None):
        want_metrics: dict[str, int] = {}
        want = run_reference(definition, spec, records, batch_size or len(records), want_metrics)
        got_metrics: dict[str, int] = {}
        assert spark_replay(spec, records, batch_size, got_metrics) == want, f"batch {batch_size}"
        assert nonzero(got_metrics) == nonzero(want_metrics)


# ---- targeted cases ----------------------------------------------------------------------------

PROPOSAL = [  # seed 000: A a0@0, A a5@5, B b2@2, B b3@3, B b4@4, A a1@1
    {"side": "left", "key": "k", "value": "a0", "ts": 0},
    {"side": "left", "key": "k", "value": "a5", "ts": 5},
    {"side": "right", "key": "k", "value": "b2", "ts": 2},
    {"side": "right", "key": "k", "value": "b3", "ts": 3},
    {"side": "right", "key": "k", "value": "b4", "ts": 4},
    {"side": "left", "key": "k", "value": "a1", "ts": 1},
]


def test_proposal_outcome_in_two_batches(spark: Any, tmp_path: Path) -> None:
    config = {"join": "inner", "left": versioned(100), "right": versioned(100)}
    items = assert_same_as_reference(spark, tmp_path, config, PROPOSAL, cuts=[3])
    assert [(i["value"], i["ts"]) for i in items] == [(["a5", "b2"], 5), (["a5", "b4"], 5)]


def test_a_wrong_join_type_is_caught(spark: Any, tmp_path: Path) -> None:
    """The comparison can fail: the same input on Spark as `outer` differs from `inner`."""
    inner = reference_items(spec_of({"join": "inner", "left": UNVERSIONED, "right": UNVERSIONED}),
                            cut(records_of(PROPOSAL), [1, 5]))
    outer = assert_same_as_reference(spark, tmp_path, {"join": "outer", "left": UNVERSIONED,
                                                       "right": UNVERSIONED}, PROPOSAL, cuts=[1, 5])
    assert outer != inner


EXPIRING = [
    {"side": "left", "key": "a", "value": "a1", "ts": 1},
    {"side": "right", "key": "a", "value": "b1", "ts": 2},
    {"side": "left", "key": "b", "value": "x", "ts": 20},   # left stream time 20
    {"side": "left", "key": "a", "value": "a2", "ts": 9},   # 9 < 20 - 10: expired
    {"side": "left", "key": "a", "value": "a3", "ts": 10},  # at the bound: stored
    {"side": "right", "key": "a", "value": "b0", "ts": 0},  # right stream time 2: in retention,
]                                                           # but out of order (older than b1)


@pytest.mark.parametrize("cuts", [[6], [2, 2, 2]], ids=["one", "three"])
def test_expired_updates_are_counted_and_quarantined(spark: Any, tmp_path: Path,
                                                     cuts: list[int]) -> None:
    config = {"join": "left", "left": versioned(10), "right": versioned(10)}
    spec = spec_of(config)
    batches = cut(records_of(EXPIRING), cuts)
    replay = ReplayLake(spark, spec, str(tmp_path), quarantine_expired=True)
    got_metrics: dict[str, int] = {}
    want_metrics: dict[str, int] = {}
    assert spark_items(replay, batches, got_metrics) == reference_items(spec, batches, want_metrics)
    assert got_metrics == want_metrics == {"out_of_order_ignored": 1, "expired": 1}
    [row] = lake.read_delta(spark, f"{replay.join_root}/quarantine").collect()
    assert (row["side"], row["key"], row["ts"], row["_seq"], row["kind"]) == ("left", '"a"', 9, 3, "expired")
    assert row["reason"] == ("expired: ts 1970-01-01T00:00:00.009Z < stream time "
                             "1970-01-01T00:00:00.020Z - history retention 10 ms = "
                             "1970-01-01T00:00:00.010Z; not stored")
    assert json.loads(row["record"]) == {"value": '"a2"'}


def test_report_of_a_batch(spark: Any, tmp_path: Path) -> None:
    spec = spec_of({"join": "left", "left": versioned(10), "right": UNVERSIONED})
    replay = ReplayLake(spark, spec, str(tmp_path))
    replay.land(records_of(EXPIRING))
    r = replay.run()
    assert (r.batch_id, r.skipped) == (0, False)
    assert r.rows_in == {"left": 4, "right": 2}
    assert r.rows_out == 2 and r.keys_changed == 2 and r.tombstones_out == 0
    assert r.expired == {"left": 1, "right": 0}
    assert r.out_of_order_ignored == {"left": 0, "right": 0}  # the right side is unversioned
    assert r.stream_time == {"left": 20, "right": 2} and r.join_stream_time == 20
    assert r.event_days_touched == ("1970-01-01",)
    assert set(r.commits) == {"output", "current", "checkpoints"}
    again = replay.run(batch_id=0)
    assert again.skipped and again.rows_out == 2
    idle = replay.run()
    assert idle.skipped and idle.batch_id is None and "no new rows" in (idle.skip_reason or "")


def test_keyed_state_is_compacted(spark: Any, tmp_path: Path) -> None:
    """Every COMPACT_EVERY batches the state log is rewritten as one row per key worth
    keeping (a versioned side's deleted key keeps its latest ts); results do not change."""
    from joins.incremental import COMPACT_EVERY

    config = {"join": "inner", "left": versioned(100), "right": UNVERSIONED}
    spec = spec_of(config)
    raw = [{"side": "left", "key": "a", "value": "a1", "ts": 5},
           {"side": "right", "key": "a", "value": "b1", "ts": 1},
           {"side": "right", "key": "c", "value": "c1", "ts": 1}]
    more = [{"side": "left", "key": "a", "value": None, "ts": 6},
            {"side": "right", "key": "c", "value": None, "ts": 2},
            {"side": "right", "key": "a", "value": "b2", "ts": 0}]
    last = [{"side": "left", "key": "a", "value": "late", "ts": 4},   # out of order after compaction
            {"side": "left", "key": "a", "value": "a3", "ts": 7}]
    records = records_of([*raw, *more, *last])
    replay = ReplayLake(spark, spec, str(tmp_path))
    replay.land(records[:3])
    replay.run(batch_id=COMPACT_EVERY - 2)
    replay.land(records[3:6])
    replay.run()  # batch COMPACT_EVERY - 1: compacts after its done record
    state = lake.read_delta(spark, f"{replay.join_root}/current").collect()
    assert [(r["key"], r["left_present"], r["left_latest_ts"], r["right_value"]) for r in state] == \
        [('"a"', False, 6, '"b2"')]
    replay.land(records[6:])
    replay.run()
    got = [item for _b, _s, item in replay.ordered_rows()]
    want = [{k: v for k, v in item.items() if k != "after_input"}
            for item in reference_items(spec, [records[:3], records[3:6], records[6:]])]
    assert got == want


def test_a_null_ts_fails_the_batch_naming_the_update(spark: Any, tmp_path: Path) -> None:
    spec = spec_of({"join": "inner", "left": UNVERSIONED, "right": UNVERSIONED})
    replay = ReplayLake(spark, spec, str(tmp_path))
    bad = spark.createDataFrame([('"k"', '"v"', None, False, 7)],
                                "key string, value string, ts long, tombstone boolean, _seq long")
    lake.write_delta(bad, replay.sources["left"], mode="append")
    with pytest.raises(Exception, match=r"left input has an update with a null ts \(key \"k\", arrival 7\)"):
        replay.run()


# ---- property: random changelogs, random batch splits ---------------------------------------


@st.composite
def join_cases(draw: st.DrawFn) -> dict[str, Any]:
    def side() -> dict[str, Any]:
        return versioned(draw(st.sampled_from([3, 100]))) if draw(st.booleans()) else UNVERSIONED

    config = {"join": draw(st.sampled_from(["inner", "left", "outer"])), "left": side(),
              "right": side()}
    n = draw(st.integers(2, 12))
    raw = [{"side": draw(st.sampled_from(["left", "right"])),
            # 1 and 1.0 are two keys (joins.core.keys), in both engines.
            "key": draw(st.sampled_from(["a", "b", 1, 1.0])),
            "value": draw(st.sampled_from(["x", "y", None, {"o": 1}, ""])),
            "ts": draw(st.integers(0, 12))} for _ in range(n)]
    cuts = draw(st.lists(st.integers(1, n), min_size=1, max_size=3))
    return {"config": config, "raw": raw, "cuts": cuts}


@pytest.mark.slow
@spark_examples(15)
@given(case=join_cases())
def test_incremental_equals_reference_for_random_changelogs(spark: Any, tmp_path_factory: Any,
                                                            case: dict[str, Any]) -> None:
    assert_same_as_reference(spark, tmp_path_factory.mktemp("ttj"), case["config"], case["raw"],
                             case["cuts"])


@pytest.mark.parametrize("join", ["inner", "left", "outer"])
def test_a_side_without_a_value_folds_in_generated_code(spark: Any, tmp_path: Path,
                                                         join: str) -> None:
    """A key whose right side has no value yet, then updates to both in the next batch: with
    generated code, a fold that typed the side's accumulator non-nullable read a null (a
    NullPointerException in the demo's second customer_accounts batch)."""
    raw = [{"side": "left", "key": "a", "value": "a1", "ts": 1},
           {"side": "left", "key": "b", "value": "b1", "ts": 1},
           {"side": "right", "key": "b", "value": "B1", "ts": 2},
           {"side": "left", "key": "a", "value": "a2", "ts": 3},
           {"side": "right", "key": "a", "value": "A1", "ts": 4},
           {"side": "right", "key": "b", "value": None, "ts": 5},
           {"side": "left", "key": "c", "value": "c1", "ts": 6}]
    with generated_code(spark):
        assert_same_as_reference(spark, tmp_path, {"join": join, "left": UNVERSIONED,
                                                   "right": UNVERSIONED}, raw, cuts=[2, 5])
