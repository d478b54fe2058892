"""The temporal history of the primary-key join (issue 10, item 3): `get(key, t)` on the
history equals a brute force over both sides' histories at every t; a backfill replaces
exactly the given event days in one commit; the incremental join's latest results equal the
history at the join's stream time when both sides are versioned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins import lake
from joins.changelog.replay import changelog_frame, loads
from joins.core.keys import key_id
from joins.core.store import VersionedStore
from joins.operators.table_table_join.backfill import backfill, latest_agreement
from joins.operators.table_table_join.columns import TableTableColumns
from joins.operators.table_table_join.history import temporal_history
from joins.operators.table_table_join.reference import TableTableJoinProcessor
from joins.operators.table_table_join.spark_replay import ReplayLake
from joins.operators.table_table_join.spec import TableTableJoinRecord, TableTableJoinSpec
from tests.budget import spark_examples
from tests.spark.test_table_table_incremental import UNVERSIONED, records_of, spec_of, versioned

pytestmark = pytest.mark.spark
DAY = 86_400_000


def stored(spec: TableTableJoinSpec, records: list[TableTableJoinRecord], side: str) -> list[Any]:
    """The side's updates its store takes, in arrival order (a versioned store refuses puts
    beyond history retention; an unversioned one takes all)."""
    mine = [r for r in records if r.side == side]
    if not spec.side(side).versioned:  # type: ignore[arg-type]
        return mine
    store = VersionedStore(spec.side(side).retention_ms)  # type: ignore[arg-type]
    return [r for r in mine if store.put(r.key, r.value, r.ts).outcome != "expired"]


def brute_force(spec: TableTableJoinSpec, records: list[TableTableJoinRecord], key: Any,
                t: int) -> list[Any] | None:
    """The join of both sides' values at t: per side the key's stored update with the largest
    (ts, arrival) at or before t; a tombstone is no value."""
    def value_at(side: str) -> Any:
        best = None
        for r in stored(spec, records, side):
            if key_id(r.key) == key_id(key) and r.ts <= t and (best is None or r.ts >= best.ts):
                best = r
        return None if best is None else best.value

    return TableTableJoinProcessor(spec).join_value(value_at("left"), value_at("right"))


def history_items(spark: Any, spec: TableTableJoinSpec,
                  records: list[TableTableJoinRecord]) -> list[Any]:
    frames = {side: changelog_frame(spark, [r for r in records if r.side == side])
              for side in ("left", "right")}
    return temporal_history(frames["left"], frames["right"], spec, TableTableColumns()).collect()


def get(rows: list[Any], key: Any, t: int) -> list[Any] | None:
    """get(key, t) on the history rows: the row valid at t."""
    found = [r for r in rows if loads(r["key"]) == key and key_id(loads(r["key"])) == key_id(key)
             and r["valid_from"] <= t and (r["valid_to"] is None or t < r["valid_to"])]
    assert len(found) <= 1, f"overlapping intervals for {key!r} at {t}: {found}"
    if not found:
        return None
    r = found[0]
    return [loads(r["left_value"]) if r["has_left"] else None,
            loads(r["right_value"]) if r["has_right"] else None]


@st.composite
def histories(draw: st.DrawFn) -> dict[str, Any]:
    def side() -> dict[str, Any]:
        return versioned(draw(st.sampled_from([2, 100]))) if draw(st.booleans()) else UNVERSIONED

    config = {"join": draw(st.sampled_from(["inner", "left", "outer"])), "left": side(),
              "right": side()}
    raw = [{"side": draw(st.sampled_from(["left", "right"])),
            "key": draw(st.sampled_from(["a", "b", 1, 1.0])),
            "value": draw(st.sampled_from(["x", "y", None, {"o": 1}])),
            "ts": draw(st.integers(0, 10))} for _ in range(draw(st.integers(1, 14)))]
    return {"config": config, "raw": raw}


@spark_examples(25)
@given(case=histories())
def test_history_get_equals_brute_force_at_every_t(spark: Any, case: dict[str, Any]) -> None:
    spec = spec_of(case["config"])
    records = records_of(case["raw"])
    rows = history_items(spark, spec, records)
    for key in ("a", "b", 1, 1.0):
        for t in range(-1, 13):
            assert get(rows, key, t) == brute_force(spec, records, key, t), (key, t)


def test_a_wrong_history_is_caught(spark: Any) -> None:
    """The comparison can fail: an out-of-order version is in the history (the incremental
    join ignores it), and the brute force of an inner join is not the outer join's history."""
    raw = [{"side": "left", "key": "k", "value": "a5", "ts": 5},
           {"side": "right", "key": "k", "value": "b1", "ts": 1},
           {"side": "left", "key": "k", "value": "a1", "ts": 1}]
    outer = spec_of({"join": "outer", "left": versioned(100), "right": versioned(100)})
    rows = history_items(spark, outer, records_of(raw))
    assert [get(rows, "k", t) for t in (0, 1, 4, 5)] == \
        [None, ["a1", "b1"], ["a1", "b1"], ["a5", "b1"]]
    inner = spec_of({"join": "inner", "left": versioned(100), "right": {"versioned": False}})
    assert brute_force(inner, records_of(raw), "k", 0) is None
    assert get(history_items(spark, outer, records_of(raw[:1])), "k", 9) != \
        brute_force(inner, records_of(raw[:1]), "k", 9)


# ---- backfills on the runtime ------------------------------------------------------------


CUSTOMERS_ACCOUNTS = [
    {"side": "left", "key": "c1", "value": {"country": "NL"}, "ts": 1 * DAY + 10},
    {"side": "right", "key": "c1", "value": {"balance": 5}, "ts": 1 * DAY + 20},
    {"side": "left", "key": "c2", "value": {"country": "FR"}, "ts": 2 * DAY + 5},
    {"side": "right", "key": "c1", "value": {"balance": 7}, "ts": 2 * DAY + 30},
    {"side": "left", "key": "c1", "value": {"country": "BE"}, "ts": 1 * DAY + 40},  # late, day 1
    {"side": "right", "key": "c2", "value": {"balance": 1}, "ts": 3 * DAY},
    {"side": "left", "key": "c2", "value": None, "ts": 3 * DAY + 5},
]


def join_lake(spark: Any, tmp_path: Path, join: str = "outer") -> ReplayLake:
    spec = spec_of({"join": join, "left": versioned(10 * DAY), "right": versioned(10 * DAY)})
    return ReplayLake(spark, spec, str(tmp_path))


def run_backfill(replay: ReplayLake, days: list[str], **kwargs: Any) -> Any:
    return backfill(replay.spark, replay.spec, replay.join_root, left_source=replay.sources["left"],
                    right_source=replay.sources["right"], days=days, **kwargs)


def test_backfill_replaces_exactly_the_days_in_one_commit(spark: Any, tmp_path: Path) -> None:
    replay = join_lake(spark, tmp_path)
    records = records_of(CUSTOMERS_ACCOUNTS)
    assert run_backfill(replay, ["1970-01-02"]).commit_version is None  # no batch yet: nothing
    replay.land(records[:4])
    replay.run()
    first = run_backfill(replay, ["1970-01-02", "1970-01-03"])
    assert first.commit_version == 0 and first.added == 4
    replay.land(records[4:])
    replay.run()
    history_path = f"{replay.join_root}/history"
    before = {r["valid_from"]: r for r in lake.read_delta(spark, history_path).collect()}
    dry = run_backfill(replay, ["1970-01-02"], dry_run=True)
    assert (dry.commit_version, dry.changed, dry.added) == (None, 1, 1)  # c1 BE from day 1
    result = run_backfill(replay, ["1970-01-02"])
    assert result.commit_version == 1 and lake.delta_version(history_path) == 1
    after = lake.read_delta(spark, history_path).collect()
    by_day: dict[str, list[Any]] = {}
    for r in after:
        by_day.setdefault(str(r["event_date"]), []).append(r)
    # Day 2 (1970-01-03) was not asked for: its rows are exactly as the first backfill wrote them.
    assert sorted(r["valid_from"] for r in by_day["1970-01-03"]) == \
        sorted(v for v, r in before.items() if str(r["event_date"]) == "1970-01-03")
    assert "1970-01-04" not in by_day
    c1 = sorted((r["valid_from"], loads(r["left_value"])["country"], r["valid_to"])
                for r in by_day["1970-01-02"] if loads(r["key"]) == "c1")
    assert c1 == [(DAY + 10, "NL", DAY + 20), (DAY + 20, "NL", DAY + 40),
                  (DAY + 40, "BE", 2 * DAY + 30)]
    assert run_backfill(replay, ["1970-01-02"]).commit_version is None  # agrees now: no commit


def test_latest_results_equal_the_history_at_stream_time(spark: Any, tmp_path: Path) -> None:
    replay = join_lake(spark, tmp_path, join="inner")
    records = records_of(CUSTOMERS_ACCOUNTS)
    for part in (records[:3], records[3:5], records[5:]):
        replay.land(part)
        replay.run()
        check = latest_agreement(spark, replay.spec, replay.join_root,
                                 left_source=replay.sources["left"],
                                 right_source=replay.sources["right"])
        assert check.agrees, check
    assert (check.stream_time, check.keys_incremental, check.keys_history) == (3 * DAY + 5, 1, 1)


def test_an_unversioned_side_taken_by_arrival_disagrees(spark: Any, tmp_path: Path) -> None:
    spec = spec_of({"join": "left", "left": UNVERSIONED, "right": versioned(100)})
    replay = ReplayLake(spark, spec, str(tmp_path))
    replay.land(records_of([{"side": "left", "key": "k", "value": "new", "ts": 5},
                            {"side": "left", "key": "k", "value": "old", "ts": 1}]))
    replay.run()
    check = latest_agreement(spark, spec, replay.join_root, left_source=replay.sources["left"],
                             right_source=replay.sources["right"])
    assert (check.keys_incremental, check.keys_history, check.different) == (1, 1, 1)


def test_users_own_delta_tables_as_the_two_sides(spark: Any, tmp_path: Path) -> None:
    """Two Delta tables in their own layout (`DeltaTableSource`: other column names, event time
    as a timestamp, a delete flag, arrival from the commit order): micro-batches, the history
    backfill and the check read them like the lake's changelogs."""
    import datetime as dt

    from joins.changelog import ChangelogColumns
    from joins.incremental import DeltaTableSource
    from joins.operators.table_table_join.spark_incremental import run_microbatch

    t0 = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)

    def rows(data: list[tuple[str, Any, int, bool]], value: str) -> Any:
        return spark.createDataFrame(
            [(k, v, t0 + dt.timedelta(minutes=m), d) for k, v, m, d in data],
            f"id string, {value} string, changed_at timestamp, is_deleted boolean")

    people, cities = str(tmp_path / "people"), str(tmp_path / "cities")
    lake.write_delta(rows([("p1", "ann", 0, False), ("p2", "bob", 1, False)], "name"), people)
    lake.write_delta(rows([("p1", "Oslo", 2, False)], "city"), cities)
    left = DeltaTableSource(people, key=("id",), ts="changed_at", tombstone="is_deleted")
    right = DeltaTableSource(cities, key=("id",), ts="changed_at", tombstone="is_deleted")
    spec = spec_of({"join": "left", "left": versioned(DAY), "right": versioned(DAY)})
    cols = TableTableColumns(left=ChangelogColumns(key="id"), right=ChangelogColumns(key="id"),
                             left_values=("name",), right_values=("city",))
    root = str(tmp_path / "join")
    assert run_microbatch(spark, spec, root, left_source=left, right_source=right, columns=cols).rows_out == 2
    lake.write_delta(rows([("p1", "Rome", 1, False), ("p2", None, 3, True)], "city"), cities)
    second = run_microbatch(spark, spec, root, left_source=left, right_source=right, columns=cols)
    # Rome@1 is older than Oslo@2: ignored; p2's right-side delete re-emits [bob, null].
    assert second.out_of_order_ignored == {"left": 0, "right": 1} and second.rows_out == 1
    result = backfill(spark, spec, root, left_source=left, right_source=right, days=["2024-03-01"],
                      columns=cols)
    history = sorted(((r["id"], r["valid_from"] % 3_600_000 // 60_000, r["right_city"])
                      for r in lake.read_delta(spark, f"{root}/history").collect()),
                     key=lambda t: (t[0], t[1]))
    assert result.commit_version == 0
    # The out-of-order Rome@1 is in the history; p2's delete on the right starts a new interval.
    assert history == [("p1", 0, None), ("p1", 1, "Rome"), ("p1", 2, "Oslo"), ("p2", 1, None),
                       ("p2", 3, None)]
    assert latest_agreement(spark, spec, root, left_source=left, right_source=right,
                            columns=cols).agrees
