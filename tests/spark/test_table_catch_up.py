"""Catch-up equals history for the table-result operators (issue 25, point 1): the table-table
join, the foreign-key join, the versioned filter and the table aggregate.

Inputs of three UTC event days, each side's updates in event-time order, versioned sides with
one day of history retention. An operator added over them takes all three days in its first
micro-batch; a pipeline down for a day takes days 2 and 3 in one. A batch whose event time
spans more than retention must judge each update by the stream time it saw, not the batch's
last: so nothing is refused, and the table the output changelog describes is the one a run
that took a day per batch ends with (and, for the joins, what their temporal history says).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.changelog.replay import loads
from joins.core.keys import KeyId, key_id
from joins.core.operator import Item, OperatorDefinition
from joins.operators import fk_join, table_aggregate, table_filter, table_table_join
from joins.operators.fk_join import backfill as fk_backfill
from joins.operators.fk_join.spark_replay import ReplayLake as FkLake
from joins.operators.table_aggregate.spark_replay import AggregateReplay
from joins.operators.table_filter.spark_replay import FilterReplay
from joins.operators.table_table_join import backfill as ttj_backfill
from joins.operators.table_table_join.spark_replay import ReplayLake as JoinLake
from tests.spark.operator_helpers import nonzero, records_of, reference_items

pytestmark = pytest.mark.spark

DAY, HOUR = 86_400_000, 3_600_000
DAYS = ("1970-01-02", "1970-01-03", "1970-01-04")   # event days 1, 2 and 3
ONE_DAY = {"versioned": True, "history_retention_ms": DAY}
NOTHING_LOST = {"expired": 0, "out_of_order": 0}


def sided(rows: Sequence[tuple[str, Any, Any, int, int]]) -> list[dict[str, Any]]:
    return [{"side": s, "key": k, "value": v, "ts": d * DAY + h * HOUR} for s, k, v, d, h in rows]


def single(rows: Sequence[tuple[Any, Any, int, int]]) -> list[dict[str, Any]]:
    return [{"key": k, "value": v, "ts": d * DAY + h * HOUR} for k, v, d, h in rows]


@dataclass(frozen=True)
class Case:
    definition: OperatorDefinition
    config: dict[str, Any]
    raw: list[dict[str, Any]]          # in arrival order = event-time order
    lake: Callable[[Any, Any, str], Any]
    history: Any = None                # the join's backfill module; None: no batch form

    @property
    def spec(self) -> Any:
        return self.definition.spec_type.model_validate(self.config)


# Every side has updates on day 1 and day 3 (more than retention apart), keys touched on day 1
# and again only on day 3, deletes, and results that change because the other side changed.
CASES = {
    "table_table_join": Case(
        table_table_join.DEFINITION, {"join": "outer", "left": ONE_DAY, "right": ONE_DAY},
        sided([("left", "k1", "a1", 1, 1), ("right", "k1", "b1", 1, 2), ("left", "k2", "a2", 1, 3),
               ("right", "k3", "c1", 1, 5), ("right", "k1", "b2", 2, 1), ("left", "k3", "a3", 2, 2),
               ("left", "k2", None, 2, 4), ("right", "k2", "x2", 2, 6), ("left", "k1", "a1+", 3, 1),
               ("right", "k3", None, 3, 2), ("left", "k2", "a2+", 3, 3), ("right", "k4", "d4", 3, 5)]),
        JoinLake, ttj_backfill),
    "fk_join": Case(
        fk_join.DEFINITION, {"foreign_key": "fk", "join": "left", "left": ONE_DAY, "right": ONE_DAY},
        sided([("right", "c1", "ann", 1, 1), ("left", "o1", {"fk": "c1", "n": 1}, 1, 2),
               ("right", "c2", "bob", 1, 3), ("left", "o2", {"fk": "c2", "n": 2}, 1, 4),
               ("right", "c1", "ann2", 2, 1), ("left", "o1", {"fk": "c2", "n": 1}, 2, 2),
               ("left", "o3", {"fk": "c3", "n": 3}, 2, 3), ("right", "c3", "cy", 3, 1),
               ("right", "c2", None, 3, 2), ("left", "o2", None, 3, 3), ("right", "c1", "ann3", 3, 4)]),
        FkLake, fk_backfill),
    "table_filter": Case(
        table_filter.DEFINITION, {"predicate": {"field": "n", "op": "ge", "value": 2}, **ONE_DAY},
        single([("a", {"n": 3}, 1, 1), ("b", {"n": 1}, 1, 2), ("c", {"n": 5}, 1, 3), ("e", {"n": 9}, 1, 5),
                ("a", {"n": 1}, 2, 1), ("b", {"n": 4}, 2, 2), ("d", {"n": 2}, 2, 3),
                ("c", None, 3, 1), ("a", {"n": 7}, 3, 2), ("d", {"n": 0}, 3, 3), ("b", {"n": 6}, 3, 4)]),
        FilterReplay),
    "table_aggregate": Case(
        table_aggregate.DEFINITION,
        {"group_by": "g", "aggregate": {"function": "sum", "field": "n"}, **ONE_DAY},
        single([("a", {"g": "x", "n": 1}, 1, 1), ("b", {"g": "x", "n": 2}, 1, 2),
                ("c", {"g": "y", "n": 5}, 1, 3), ("a", {"g": "y", "n": 1}, 2, 1),
                ("d", {"g": "z", "n": 4}, 2, 2), ("c", None, 2, 3), ("b", {"g": "z", "n": 3}, 3, 1),
                ("a", {"g": "y", "n": 10}, 3, 2), ("d", None, 3, 3), ("e", {"g": "x", "n": 7}, 3, 4)]),
        AggregateReplay),
}


def by_day(records: Sequence[Any]) -> list[list[Any]]:
    return [[r for r in records if r.ts // DAY == d] for d in (1, 2, 3)]


@dataclass
class Run:
    items: list[Item]                  # the output changelog, with the reference's after_input
    lost: list[dict[str, int]]         # per batch: updates refused as expired or out of order
    replay: Any


def lost_of(result: Any) -> dict[str, int]:
    if hasattr(result, "expired"):     # the joins' reports count per side
        return {"expired": sum(result.expired.values()),
                "out_of_order": sum(result.out_of_order_ignored.values())}
    report = result.done.report
    return {"expired": int(report.get("expired", 0)),
            "out_of_order": int(report.get("out_of_order_ignored", 0))
            + int(report.get("out_of_order_forwarded", 0))}


def run_spark(spark: Any, case: Case, batches: Sequence[Sequence[Any]], root: Path) -> Run:
    """Spark over `batches`, the output equal to the reference's over the same batches."""
    replay = case.lake(spark, case.spec, str(root))
    last: dict[int, int] = {}
    lost = []
    for batch in batches:
        replay.land(batch)
        result = replay.run()
        assert result.batch_id is not None
        last[result.batch_id] = batch[-1].i
        lost.append(lost_of(result))
    items = [{**row[-1], "after_input": last[row[0]]} for row in replay.ordered_rows()]
    want_metrics: dict[str, int] = {}
    assert items == reference_items(case.definition, case.spec, batches, want_metrics)
    assert nonzero(want_metrics) == {}
    return Run(items, lost, replay)


def table_state(items: Sequence[Item], upto: int | None = None) -> dict[KeyId, tuple[Any, int]]:
    """The table a changelog describes (up to input `upto`): per key its last latest value and
    ts; a null value deletes the key. Out-of-order history items never change the table."""
    state: dict[KeyId, tuple[Any, int]] = {}
    for item in items:
        if item.get("is_latest", True) is False or (upto is not None and item["after_input"] > upto):
            continue
        if item["value"] is None:
            state.pop(key_id(item["key"]), None)
        else:
            state[key_id(item["key"])] = (item["value"], item["ts"])
    return state


@pytest.fixture(scope="module")
def daily(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """The run that never stopped: a day per batch, made once per operator for both tests."""
    runs: dict[str, Run] = {}

    def get(name: str) -> Run:
        if name not in runs:
            case = CASES[name]
            runs[name] = run_spark(spark, case, by_day(records_of(case.definition, case.raw)),
                                   tmp_path_factory.mktemp(f"daily-{name}"))
            assert runs[name].lost == [NOTHING_LOST] * 3
        return runs[name]

    return get


def history_at_day_ends(spark: Any, case: Case, replay: Any) -> list[dict[KeyId, list[Any]]]:
    """Backfill the three days' history, then read each day's last instant's results off it."""
    sources = {f"{side}_source": replay.sources[side] for side in ("left", "right")}
    done = case.history.backfill(spark, replay.spec, replay.join_root, days=list(DAYS), **sources)
    assert done.commit_version == 0 and done.added > 0
    assert case.history.latest_agreement(spark, replay.spec, replay.join_root, **sources).agrees
    rows = lake.read_delta(spark, f"{replay.join_root}/history").collect()
    out = []
    for day in (1, 2, 3):
        t = (day + 1) * DAY - 1
        out.append({key_id(loads(r["key"])): [loads(r["left_value"]) if r["has_left"] else None,
                                              loads(r["right_value"]) if r["has_right"] else None]
                    for r in rows if r["valid_from"] <= t and (r["valid_to"] is None or t < r["valid_to"])})
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_an_operator_added_over_three_days_catches_up_to_their_day_by_day_state(
        spark: Any, tmp_path: Path, daily: Callable[[str], Run], name: str) -> None:
    case = CASES[name]
    records = records_of(case.definition, case.raw)
    caught_up = run_spark(spark, case, [records], tmp_path)
    # Judged by the batch's final stream time (day 3), every day-1 update would expire.
    assert caught_up.lost == [NOTHING_LOST]
    day_by_day = daily(name)
    assert table_state(caught_up.items) == table_state(day_by_day.items) != {}
    if case.history is None:
        return
    # The history backfilled over the catch-up holds at each day's end what the day-by-day
    # run held after that day's batch.
    ends = [day[-1].i for day in by_day(records)]
    held = [{k: v for k, (v, _ts) in table_state(day_by_day.items, upto=end).items()} for end in ends]
    assert history_at_day_ends(spark, case, caught_up.replay) == held


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_an_operator_down_for_a_day_resumes_to_the_state_of_one_that_never_stopped(
        spark: Any, tmp_path: Path, daily: Callable[[str], Run], name: str) -> None:
    case = CASES[name]
    one, two, three = by_day(records_of(case.definition, case.raw))
    resumed = run_spark(spark, case, [one, [*two, *three]], tmp_path)
    assert resumed.lost == [NOTHING_LOST, NOTHING_LOST]
    assert table_state(resumed.items) == table_state(daily(name).items) != {}
