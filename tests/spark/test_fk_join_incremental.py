"""The Spark foreign-key join (issue 11, item 1) against the reference engine.

The oracle is the record-at-a-time reference processor (KIP-213's queues drained after every
record) driven by the micro-batch rule (both sides' updates of a batch in arrival order, the
output compacted to the last result per key): same batches, same items in the same order, same
counters of what produced nothing. Every Spark micro-batch costs seconds here, so inputs are
small and batches few.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins import lake
from joins.core.operator import Item
from joins.microbatch import run_reference
from joins.operators.fk_join import DEFINITION
from joins.operators.fk_join.spark_replay import COMPARABLE, ReplayLake, counters_of, spark_replay
from joins.operators.fk_join.spec import FkJoinRecord, FkJoinSpec
from tests.budget import spark_examples
from tests.spark import operator_helpers as helpers
from tests.spark.operator_helpers import cut, scenarios_of

pytestmark = pytest.mark.spark

# ---- helpers shared with the crash and backfill tests --------------------------------------


def spec_of(config: dict[str, Any]) -> FkJoinSpec:
    return FkJoinSpec.model_validate({"foreign_key": "fk", **config})


def records_of(raw: Sequence[dict[str, Any]], start: int = 0) -> list[FkJoinRecord]:
    return helpers.records_of(DEFINITION, raw, start)


def comparable(metrics: dict[str, int]) -> dict[str, int]:
    return {k: metrics.get(k, 0) for k in COMPARABLE}


def spark_items(replay: ReplayLake, batches: Sequence[Sequence[FkJoinRecord]],
                metrics: dict[str, int] | None = None, **run: Any) -> list[Item]:
    last: dict[int, int] = {}
    reports = []
    for batch in batches:
        replay.land(batch)
        report = replay.run(**run)
        assert report.batch_id is not None
        last[report.batch_id] = batch[-1].i
        reports.append(report)
    if metrics is not None:
        metrics.update(counters_of(reports))
    return [{**item, "after_input": last[bid]} for bid, _seq, _key, item in replay.ordered_rows()]


def assert_same_as_reference(spark: Any, tmp_path: Path, config: dict[str, Any],
                             raw: Sequence[dict[str, Any]], cuts: Sequence[int]) -> dict[str, int]:
    spec = spec_of(config)
    batches = cut(records_of(raw), cuts)
    want_metrics: dict[str, int] = {}
    want = helpers.reference_items(DEFINITION, spec, batches, want_metrics)
    got_metrics: dict[str, int] = {}
    got = spark_items(ReplayLake(spark, spec, str(tmp_path)), batches, got_metrics)
    assert got == want
    assert comparable(got_metrics) == comparable(want_metrics)
    return got_metrics


def versioned(retention: int) -> dict[str, Any]:
    return {"versioned": True, "history_retention_ms": retention}


UNVERSIONED = {"versioned": False}
PLAIN = {"left": UNVERSIONED, "right": UNVERSIONED}

# ---- every shipped scenario ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("path", scenarios_of("fk_join"), ids=lambda p: p.stem)
def test_every_fk_join_scenario_on_spark(spark: Any, path: Path) -> None:
    """Batch sizes 1, 2 and the whole input: the Spark engine equals the reference engine with
    the same batches (items in order, and the counters both engines share)."""
    from joins.scenario import load_scenario
    from joins.scenario.runner import prepare

    scenario = load_scenario(path)
    definition, spec, records = prepare(scenario)
    for batch_size in (1, 2, None):
        want_metrics: dict[str, int] = {}
        want = run_reference(definition, spec, records, batch_size or len(records), want_metrics)
        got_metrics: dict[str, int] = {}
        assert spark_replay(spec, records, batch_size, got_metrics) == want, f"batch {batch_size}"
        assert comparable(got_metrics) == comparable(want_metrics)
        if batch_size == 1:
            assert want == scenario.expected


# ---- the stale-response guard at batch scale ------------------------------------------------

# An order moves from customer Y to customer Z while Y changes, all in one batch: the
# subscription store still holds (Y, A) when Y's update fans out, so the fan-out answers A
# with the hash of A's old value; by then (the micro-batch rule) A holds its new value.
MOVE = [
    {"side": "right", "key": "Y", "value": "bar", "ts": 1},
    {"side": "right", "key": "Z", "value": "zed", "ts": 1},
    {"side": "left", "key": "A", "value": {"fk": "Y", "n": 1}, "ts": 2},
    # second batch
    {"side": "left", "key": "A", "value": {"fk": "Z", "n": 2}, "ts": 3},
    {"side": "right", "key": "Y", "value": "bar2", "ts": 4},
]
# Seed 004's "Original Value Hash" example: the FK stays, the value changes, then the right
# row changes: the fan-out answers both the old subscription (A|Y,1) and the new one (A|Y,2).
SAME_FK = [
    {"side": "right", "key": "Y", "value": "bar", "ts": 1},
    {"side": "left", "key": "A", "value": {"fk": "Y", "n": 1}, "ts": 2},
    # second batch
    {"side": "left", "key": "A", "value": {"fk": "Y", "n": 2}, "ts": 3},
    {"side": "right", "key": "Y", "value": "bar2", "ts": 4},
]


@pytest.mark.parametrize(("raw", "last"), [
    (MOVE, {"key": "A", "value": [{"fk": "Z", "n": 2}, "zed"], "ts": 3, "after_input": 4}),
    (SAME_FK, {"key": "A", "value": [{"fk": "Y", "n": 2}, "bar2"], "ts": 4, "after_input": 3}),
], ids=["fk_moved", "value_changed"])
def test_a_stale_fan_out_is_discarded(spark: Any, tmp_path: Path, raw: list[Any],
                                      last: Item) -> None:
    cuts = [3] if raw is MOVE else [2]
    metrics = assert_same_as_reference(spark, tmp_path / "guarded", {"join": "left", **PLAIN},
                                       raw, cuts)
    assert metrics["stale_response_discarded"] == 1
    spec = spec_of({"join": "left", **PLAIN})
    batches = cut(records_of(raw), cuts)
    want = helpers.reference_items(DEFINITION, spec, batches)
    assert want[-1] == last
    if raw is MOVE:
        # Without the guard the stale response becomes A's result ([A at Z, Y's new value]):
        # the guard is what makes the set-wise protocol right. (With the FK unchanged the
        # stale response would only duplicate the right one, which compaction hides.)
        unguarded = spark_items(ReplayLake(spark, spec, str(tmp_path / "unguarded")), batches,
                                verify_hash=False)
        assert unguarded[-1]["value"] == [{"fk": "Z", "n": 2}, "bar2"]


@pytest.mark.parametrize("limit", [0, 10**6], ids=["cached", "checkpointed"])
def test_a_batch_is_the_same_whether_its_frames_are_cached_or_checkpointed(
        spark: Any, tmp_path: Path, limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every other test's batches are small (their shared frames checkpointed); a batch above
    # the limit caches them instead. Both sides change in one batch and the guard discards a
    # stale response, so every shared frame is read.
    from joins.spark import frames

    monkeypatch.setattr(frames, "CHECKPOINT_MAX_ROWS", limit)
    metrics = assert_same_as_reference(spark, tmp_path, {"join": "left", **PLAIN}, MOVE, [3])
    assert metrics["stale_response_discarded"] == 1


def test_partitioning_does_not_change_the_result(spark: Any, tmp_path: Path) -> None:
    """The guard decides by hash at each response's place in the batch, never by the order in
    which Spark tasks see rows: 1 or 9 shuffle partitions (adaptive execution off, so they
    stay that many) give the same rows."""
    raw = [*MOVE, *SAME_FK[2:]]
    batches = cut(records_of(raw), [3])
    spec = spec_of({"join": "inner", **PLAIN})
    conf = spark.conf
    saved = {k: conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")}
    results = []
    try:
        conf.set("spark.sql.adaptive.enabled", "false")
        for n in (1, 9):
            conf.set("spark.sql.shuffle.partitions", str(n))
            results.append(spark_items(ReplayLake(spark, spec, str(tmp_path / str(n))), batches))
    finally:
        for k, v in saved.items():
            conf.set(k, v)
    assert results[0] == results[1] == helpers.reference_items(DEFINITION, spec, batches)


# ---- targeted cases ----------------------------------------------------------------------------

EXPIRING = [
    {"side": "right", "key": "c", "value": "c1", "ts": 1},
    {"side": "left", "key": "a", "value": {"fk": "c"}, "ts": 2},
    {"side": "left", "key": "b", "value": {"fk": "c"}, "ts": 20},   # left stream time 20
    {"side": "left", "key": "a", "value": {"fk": "d"}, "ts": 9},    # 9 < 20 - 10: expired
    {"side": "left", "key": "a", "value": {"fk": "c", "v": 3}, "ts": 10},  # at the bound: stored
    {"side": "right", "key": "c", "value": "c0", "ts": 0},          # out of order (older than c1)
]


@pytest.mark.parametrize("cuts", [[6], [2, 2, 2]], ids=["one", "three"])
def test_expired_updates_are_counted_and_quarantined(spark: Any, tmp_path: Path,
                                                     cuts: list[int]) -> None:
    spec = spec_of({"join": "inner", "left": versioned(10), "right": versioned(10)})
    batches = cut(records_of(EXPIRING), cuts)
    replay = ReplayLake(spark, spec, str(tmp_path), quarantine_expired=True)
    got_metrics: dict[str, int] = {}
    want_metrics: dict[str, int] = {}
    assert spark_items(replay, batches, got_metrics) == helpers.reference_items(
        DEFINITION, spec, batches, want_metrics)
    assert comparable(got_metrics) == comparable(want_metrics) == {
        "out_of_order_ignored": 1, "expired": 1, "null_foreign_key_skipped": 0}
    [row] = lake.read_delta(spark, f"{replay.join_root}/quarantine").collect()
    assert (row["side"], row["key"], row["ts"], row["_seq"], row["kind"]) == ("left", '"a"', 9, 3, "expired")
    assert row["reason"] == ("expired: ts 1970-01-01T00:00:00.009Z < stream time "
                             "1970-01-01T00:00:00.020Z - history retention 10 ms = "
                             "1970-01-01T00:00:00.010Z; not stored")


def test_report_of_a_batch(spark: Any, tmp_path: Path) -> None:
    spec = spec_of({"join": "left", **PLAIN})
    replay = ReplayLake(spark, spec, str(tmp_path))
    replay.land(records_of(MOVE))
    r = replay.run()
    assert (r.batch_id, r.skipped) == (0, False)
    assert r.rows_in == {"left": 2, "right": 3}
    # A: subscribe Y (answered), then unsubscribe Y and subscribe Z (answered).
    assert (r.subscriptions_sent, r.subscriptions, r.answers) == (3, 1, 2)
    # Y's two updates fan out to A's subscription to Y (made before the second only).
    assert (r.fan_out, r.stale_discarded, r.rows_out) == (1, 1, 1)
    assert r.stream_time == {"left": 3, "right": 4} and r.join_stream_time == 4
    assert set(r.commits) == {"output", "lhs", "rhs", "subscriptions", "checkpoints"}
    again = replay.run(batch_id=0)
    assert again.skipped and again.rows_out == 1
    idle = replay.run()
    assert idle.skipped and idle.batch_id is None and "no new rows" in (idle.skip_reason or "")


def test_state_is_compacted(spark: Any, tmp_path: Path) -> None:
    """Every COMPACT_EVERY batches the state logs are rewritten as one row per key worth
    keeping (a versioned side's deleted key keeps its latest ts; a subscription that was
    removed goes); results do not change."""
    from joins.incremental import COMPACT_EVERY

    spec = spec_of({"join": "inner", "left": versioned(100), "right": UNVERSIONED})
    raw = [{"side": "left", "key": "a", "value": {"fk": "x"}, "ts": 5},
           {"side": "right", "key": "x", "value": "x1", "ts": 1},
           {"side": "left", "key": "a", "value": None, "ts": 6},
           {"side": "left", "key": "a", "value": {"fk": "x", "late": True}, "ts": 4},  # out of order
           {"side": "left", "key": "a", "value": {"fk": "x"}, "ts": 7}]
    records = records_of(raw)
    batches = [records[:2], records[2:3], records[3:]]
    replay = ReplayLake(spark, spec, str(tmp_path))
    replay.land(batches[0])
    replay.run(batch_id=COMPACT_EVERY - 2)
    replay.land(batches[1])
    replay.run()  # batch COMPACT_EVERY - 1: compacts after its done record
    lhs = lake.read_delta(spark, f"{replay.join_root}/lhs").collect()
    assert [(r["key"], r["_present"], r["_latest_ts"]) for r in lhs] == [('"a"', False, 6)]
    assert lake.read_delta(spark, f"{replay.join_root}/subscriptions").count() == 0
    replay.land(batches[2])
    replay.run()
    got = [item for _b, _s, _k, item in replay.ordered_rows()]
    want = [{k: v for k, v in item.items() if k != "after_input"}
            for item in helpers.reference_items(DEFINITION, spec, batches)]
    assert got == want


def test_a_null_ts_fails_the_batch_naming_the_update(spark: Any, tmp_path: Path) -> None:
    replay = ReplayLake(spark, spec_of({"join": "inner", **PLAIN}), str(tmp_path))
    bad = spark.createDataFrame([('"k"', '{"fk":1}', None, False, 7, "1")],
                                "key string, value string, ts long, tombstone boolean, _seq long, "
                                "fk string")
    lake.write_delta(bad, replay.sources["left"], mode="append")
    with pytest.raises(Exception, match=r"left input has an update with a null ts \(key \"k\", arrival 7\)"):
        replay.run()


def test_a_foreign_key_of_another_type_than_the_right_key_is_refused(spark: Any, tmp_path: Path) -> None:
    from joins.errors import ConfigError

    replay = ReplayLake(spark, spec_of({"join": "inner", **PLAIN}), str(tmp_path), create=False)
    left = spark.createDataFrame([], "key string, value string, ts long, tombstone boolean, "
                                     "_seq long, fk bigint")
    lake.write_delta(left, replay.sources["left"], mode="append")
    replay._append("right", records_of([{"side": "right", "key": "x", "value": 1, "ts": 1}]))
    with pytest.raises(ConfigError, match="foreign key 'fk' of the left input is bigint but the "
                                          "right key 'key' is string"):
        replay.run()


# ---- property: random changelogs, random batch splits ---------------------------------------


@st.composite
def fk_cases(draw: st.DrawFn) -> dict[str, Any]:
    def side() -> dict[str, Any]:
        return versioned(draw(st.sampled_from([3, 100]))) if draw(st.booleans()) else UNVERSIONED

    config = {"join": draw(st.sampled_from(["inner", "left"])), "left": side(), "right": side()}
    # 1 and 1.0 are two right keys (joins.core.keys): a foreign key 1.0 never joins key 1.
    fks = st.sampled_from(["x", "y", 1, 1.0])
    left_value = st.one_of(st.none(), st.builds(lambda fk, n: {"fk": fk, "n": n}, fks,
                                                st.integers(0, 1)),
                           st.just({"fk": None}), st.just({"other": 1}))
    n = draw(st.integers(2, 12))
    raw = []
    for _ in range(n):
        if draw(st.booleans()):
            raw.append({"side": "left", "key": draw(st.sampled_from(["a", "b", "c"])),
                        "value": draw(left_value), "ts": draw(st.integers(0, 12))})
        else:
            raw.append({"side": "right", "key": draw(fks),
                        "value": draw(st.sampled_from(["r", "s", None])),
                        "ts": draw(st.integers(0, 12))})
    cuts = draw(st.lists(st.integers(1, n), min_size=1, max_size=2))
    return {"config": config, "raw": raw, "cuts": cuts}


@pytest.mark.slow
@spark_examples(12)
@given(case=fk_cases())
def test_incremental_equals_reference_for_random_changelogs(spark: Any, tmp_path_factory: Any,
                                                            case: dict[str, Any]) -> None:
    assert_same_as_reference(spark, tmp_path_factory.mktemp("fk"), case["config"], case["raw"],
                             case["cuts"])
