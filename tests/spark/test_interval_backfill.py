"""Backfill of the interval join (issue 12, item 1: the batch form used by backfills): a complete
day recomputed from the consumed input agrees with the micro-batches; a late row they dropped
is added by the backfill; an incomplete day is refused."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.errors import ConfigError
from joins.operators.interval_join.backfill import backfill
from joins.operators.interval_join.spark_replay import ReplayLake
from tests.spark.test_interval_incremental import records_of, spec_of

pytestmark = pytest.mark.spark

T0 = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
H = 3_600_000


def row(side: str, name: str, t: int, k: str) -> dict[str, Any]:
    return {"side": side, "row": {"id": name, "t": t, "k": k, "v": 1}}


def wm(side: str, t: int) -> dict[str, Any]:
    return {"side": side, "watermark": {"t": t}}


FIRST = [row("left", "a1", T0 + H, "x"), row("right", "b1", T0 + H + 1000, "x"),
         row("left", "a2", T0 + 5 * H, "y"), row("right", "b2", T0 + 20 * H, "z"),
         row("left", "a0", T0 - 2 * H, "w"),                     # the day before
         wm("left", T0 + 21 * H), wm("right", T0 + 21 * H)]
SECOND = [row("left", "late", T0 + 2 * H, "q"),                  # dropped as late
          wm("left", T0 + 72 * H), wm("right", T0 + 72 * H)]


@pytest.fixture
def ran(spark: Any, tmp_path: Path) -> ReplayLake:
    records = records_of(FIRST + SECOND)
    replay = ReplayLake(spark, spec_of("l.t BETWEEN r.t - 2000 AND r.t + 2000 AND l.k = r.k",
                                       "full"), str(tmp_path), records)
    replay.land(records[:len(FIRST)])
    replay.run()
    replay.land(records[len(FIRST):])
    assert replay.run().late_dropped == {"left": 1, "right": 0}
    return replay


def run_backfill(replay: ReplayLake, days: list[str], dry_run: bool) -> Any:
    return backfill(replay.spark, replay.step(), replay.join_root, left_source=replay.paths["left"],
                    right_source=replay.paths["right"], days=days, dry_run=dry_run)


def output_ids(replay: ReplayLake, day: str) -> list[tuple[Any, ...]]:
    rows = lake.read_delta(replay.spark, f"{replay.join_root}/output").collect()
    return sorted((r["_kind"], r["l_id"], r["r_id"]) for r in rows
                  if r["event_date"] is not None and str(r["event_date"]) == day)


def test_backfill_adds_the_dropped_late_row_and_then_agrees(ran: ReplayLake) -> None:
    day = "2026-01-01"
    assert output_ids(ran, day) == [("joined", "a1", "b1"), ("left", "a2", None),
                                    ("right", None, "b2")]
    check = run_backfill(ran, [day], dry_run=True)
    assert (check.added, check.removed, check.changed) == (1, 0, 0) and check.commit_version is None
    done = run_backfill(ran, [day], dry_run=False)
    assert done.commit_version is not None
    assert output_ids(ran, day) == [("joined", "a1", "b1"), ("left", "a2", None),
                                    ("left", "late", None), ("right", None, "b2")]
    assert run_backfill(ran, [day], dry_run=True).agrees
    # The day before is untouched and agrees too.
    assert run_backfill(ran, ["2025-12-31"], dry_run=True).agrees


def test_a_day_the_micro_batches_may_still_add_to_is_refused(ran: ReplayLake) -> None:
    with pytest.raises(ConfigError, match=r"day 2026-01-03 is not complete"):
        run_backfill(ran, ["2026-01-03"], dry_run=True)
