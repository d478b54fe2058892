"""The batch form of the foreign-key join (issue 11, item 2): `get(key, t)` on its temporal
history equals a brute force over both sides' histories at every t; a backfill replaces
exactly the given event days in one commit; the incremental join's current results equal the
history at the join's stream time when both sides are versioned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins import lake
from joins.changelog.replay import loads
from joins.core.keys import key_id
from joins.core.store import VersionedStore
from joins.operators.fk_join.backfill import backfill, latest_agreement
from joins.operators.fk_join.columns import FkColumns
from joins.operators.fk_join.spark_batch import temporal_history
from joins.operators.fk_join.spark_replay import LEFT_SCHEMA, ReplayLake, left_row
from joins.operators.fk_join.spec import FkJoinRecord, FkJoinSpec
from tests.budget import spark_examples
from tests.spark.test_fk_join_incremental import UNVERSIONED, records_of, spec_of, versioned

pytestmark = pytest.mark.spark
DAY = 86_400_000


def stored(spec: FkJoinSpec, records: list[FkJoinRecord], side: str) -> list[FkJoinRecord]:
    """The side's updates its store takes, in arrival order (a versioned store refuses puts
    beyond history retention; an unversioned one takes all)."""
    mine = [r for r in records if r.side == side]
    s = spec.left if side == "left" else spec.right
    if not s.versioned:
        return mine
    store = VersionedStore(s.retention_ms)
    return [r for r in mine if store.put(r.key, r.value, r.ts).outcome != "expired"]


def value_at(spec: FkJoinSpec, records: list[FkJoinRecord], side: str, key: Any, t: int) -> Any:
    """The key's stored update with the largest (ts, arrival) at or before t (None: none, or a
    tombstone)."""
    best = None
    for r in stored(spec, records, side):
        if key_id(r.key) == key_id(key) and r.ts <= t and (best is None or r.ts >= best.ts):
            best = r
    return None if best is None else best.value


def brute_force(spec: FkJoinSpec, records: list[FkJoinRecord], key: Any, t: int) -> list[Any] | None:
    """The FK join at t: the left value at t and the value at t of the right key it names."""
    left = value_at(spec, records, "left", key, t)
    if left is None:
        return None
    fk = spec.extract_foreign_key(left)
    right = None if fk is None else value_at(spec, records, "right", fk, t)
    if right is None and spec.join == "inner":
        return None
    return [left, right]


def history_rows(spark: Any, spec: FkJoinSpec, records: list[FkJoinRecord]) -> list[Any]:
    from joins.changelog.replay import changelog_frame

    left = spark.createDataFrame([left_row(spec, r) for r in records if r.side == "left"],
                                 LEFT_SCHEMA)
    right = changelog_frame(spark, [r for r in records if r.side == "right"])
    return temporal_history(left, right, spec, FkColumns()).collect()


def get(rows: list[Any], key: Any, t: int) -> list[Any] | None:
    """get(key, t) on the history rows: the row valid at t."""
    found = [r for r in rows if key_id(loads(r["key"])) == key_id(key)
             and r["valid_from"] <= t and (r["valid_to"] is None or t < r["valid_to"])]
    assert len(found) <= 1, f"overlapping intervals for {key!r} at {t}: {found}"
    if not found:
        return None
    r = found[0]
    return [loads(r["left_value"]), loads(r["right_value"]) if r["has_right"] else None]


@st.composite
def histories(draw: st.DrawFn) -> dict[str, Any]:
    def side() -> dict[str, Any]:
        return versioned(draw(st.sampled_from([2, 100]))) if draw(st.booleans()) else UNVERSIONED

    config = {"join": draw(st.sampled_from(["inner", "left"])), "left": side(), "right": side()}
    fks = st.sampled_from(["x", "y", 1, 1.0])
    raw = []
    for _ in range(draw(st.integers(1, 14))):
        if draw(st.booleans()):
            raw.append({"side": "left", "key": draw(st.sampled_from(["a", "b"])),
                        "value": draw(st.one_of(st.none(), st.just({"fk": None}),
                                                st.builds(lambda f: {"fk": f}, fks))),
                        "ts": draw(st.integers(0, 10))})
        else:
            raw.append({"side": "right", "key": draw(fks), "value": draw(st.sampled_from(
                ["r", "s", None])), "ts": draw(st.integers(0, 10))})
    return {"config": config, "raw": raw}


@spark_examples(25)
@given(case=histories())
def test_history_get_equals_brute_force_at_every_t(spark: Any, case: dict[str, Any]) -> None:
    spec = spec_of(case["config"])
    records = records_of(case["raw"])
    rows = history_rows(spark, spec, records)
    for key in ("a", "b"):
        for t in range(-1, 13):
            assert get(rows, key, t) == brute_force(spec, records, key, t), (key, t)


def test_a_wrong_history_is_caught(spark: Any) -> None:
    """The comparison can fail: an out-of-order left version is in the history (the incremental
    join ignores it), and an order that moved is joined with its new customer only from then."""
    raw = [{"side": "left", "key": "o", "value": {"fk": "c2"}, "ts": 5},
           {"side": "right", "key": "c1", "value": "ann", "ts": 1},
           {"side": "right", "key": "c2", "value": "bob", "ts": 3},
           {"side": "left", "key": "o", "value": {"fk": "c1"}, "ts": 2}]
    spec = spec_of({"join": "left", "left": versioned(100), "right": versioned(100)})
    rows = history_rows(spark, spec, records_of(raw))
    assert [get(rows, "o", t) for t in (1, 2, 4, 5)] == \
        [None, [{"fk": "c1"}, "ann"], [{"fk": "c1"}, "ann"], [{"fk": "c2"}, "bob"]]
    inner = spec_of({"join": "inner", "left": versioned(100), "right": versioned(100)})
    assert brute_force(inner, records_of(raw[:1]), "o", 9) is None
    assert get(rows, "o", 9) != brute_force(inner, records_of(raw), "o", 1)


# ---- backfills on the runtime ------------------------------------------------------------

ORDERS_CUSTOMERS = [
    {"side": "right", "key": "c1", "value": {"name": "Ann"}, "ts": 1 * DAY + 1},
    {"side": "left", "key": "o1", "value": {"fk": "c1", "amount": 5}, "ts": 1 * DAY + 10},
    {"side": "right", "key": "c2", "value": {"name": "Bob"}, "ts": 1 * DAY + 20},
    {"side": "left", "key": "o1", "value": {"fk": "c2", "amount": 5}, "ts": 2 * DAY + 5},  # moves
    {"side": "right", "key": "c1", "value": {"name": "Ann B."}, "ts": 1 * DAY + 30},  # late, day 1
    {"side": "right", "key": "c2", "value": {"name": "Bobby"}, "ts": 3 * DAY},
    {"side": "left", "key": "o2", "value": {"fk": "c1", "amount": 1}, "ts": 3 * DAY + 5},
]


def join_lake(spark: Any, tmp_path: Path, join: str = "left") -> ReplayLake:
    spec = spec_of({"join": join, "left": versioned(10 * DAY), "right": versioned(10 * DAY)})
    return ReplayLake(spark, spec, str(tmp_path))


def run_backfill(replay: ReplayLake, days: list[str], **kwargs: Any) -> Any:
    return backfill(replay.spark, replay.spec, replay.join_root, left_source=replay.sources["left"],
                    right_source=replay.sources["right"], days=days, **kwargs)


def test_backfill_replaces_exactly_the_days_in_one_commit(spark: Any, tmp_path: Path) -> None:
    replay = join_lake(spark, tmp_path)
    records = records_of(ORDERS_CUSTOMERS)
    assert run_backfill(replay, ["1970-01-02"]).commit_version is None  # no batch yet: nothing
    replay.land(records[:4])
    replay.run()
    first = run_backfill(replay, ["1970-01-02", "1970-01-03"])
    assert first.commit_version == 0 and first.added == 2   # o1 with Ann, then with Bob
    replay.land(records[4:])
    replay.run()
    history_path = f"{replay.join_root}/history"
    before = lake.read_delta(spark, history_path).collect()
    dry = run_backfill(replay, ["1970-01-02"], dry_run=True)
    assert (dry.commit_version, dry.changed, dry.added) == (None, 1, 1)  # Ann B. from day 1
    result = run_backfill(replay, ["1970-01-02"])
    assert result.commit_version == 1 and lake.delta_version(history_path) == 1
    after = lake.read_delta(spark, history_path).collect()
    day = {str(r["event_date"]) for r in after}
    assert day == {"1970-01-02", "1970-01-03"}  # day 4 (o2, Bobby) was never asked for
    # Day 3 was not asked for: its rows are exactly as the first backfill wrote them.
    assert sorted(r["valid_from"] for r in after if str(r["event_date"]) == "1970-01-03") == \
        sorted(r["valid_from"] for r in before if str(r["event_date"]) == "1970-01-03")
    o1 = sorted((r["valid_from"], loads(r["right_value"])["name"], r["valid_to"])
                for r in after if str(r["event_date"]) == "1970-01-02")
    assert o1 == [(DAY + 10, "Ann", DAY + 30), (DAY + 30, "Ann B.", 2 * DAY + 5)]
    assert run_backfill(replay, ["1970-01-02"]).commit_version is None  # agrees now: no commit


def test_latest_results_equal_the_history_at_stream_time(spark: Any, tmp_path: Path) -> None:
    replay = join_lake(spark, tmp_path, join="inner")
    records = records_of(ORDERS_CUSTOMERS)
    for part in (records[:3], records[3:5], records[5:]):
        replay.land(part)
        replay.run()
        check = latest_agreement(spark, replay.spec, replay.join_root,
                                 left_source=replay.sources["left"],
                                 right_source=replay.sources["right"])
        assert check.agrees, check
    assert (check.stream_time, check.keys_incremental, check.keys_history) == (3 * DAY + 5, 2, 2)


def test_an_unversioned_side_taken_by_arrival_disagrees(spark: Any, tmp_path: Path) -> None:
    spec = spec_of({"join": "left", "left": UNVERSIONED, "right": versioned(100)})
    replay = ReplayLake(spark, spec, str(tmp_path))
    replay.land(records_of([{"side": "left", "key": "k", "value": {"fk": "new"}, "ts": 5},
                            {"side": "left", "key": "k", "value": {"fk": "old"}, "ts": 1}]))
    replay.run()
    check = latest_agreement(spark, spec, replay.join_root, left_source=replay.sources["left"],
                             right_source=replay.sources["right"])
    assert (check.keys_incremental, check.keys_history, check.different) == (1, 1, 1)
