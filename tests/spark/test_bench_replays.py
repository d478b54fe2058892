"""`bench.replays`, the suite's micro-batch cost: a variant that changes a replay's items fails
rather than being timed, the variant's settings are undone after each round, and bad arguments
are refused by name."""

from __future__ import annotations

import os
from typing import Any

import pytest

from bench import replays

pytestmark = pytest.mark.spark

SMALL = "004_stale_hash_record_at_a_time"   # three records


def test_a_replay_that_differs_from_the_reference_fails(spark: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import joins.microbatch

    replays.case(SMALL, None).replay()            # agrees: no exit
    monkeypatch.setattr(joins.microbatch, "run_reference", lambda *_a, **_k: [])
    with pytest.raises(SystemExit, match=f"{SMALL} at batch size None: .* differ"):
        replays.case(SMALL, None).replay()


def test_a_variant_is_undone_after_its_round(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TJ_BENCH_REPLAYS_PROBE", raising=False)
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    with replays.variant(spark, {key: "7"}, {"TJ_BENCH_REPLAYS_PROBE": "1"}):
        assert spark.conf.get(key) == "7"
        assert os.environ["TJ_BENCH_REPLAYS_PROBE"] == "1"
    assert spark.conf.get(key) == before
    assert "TJ_BENCH_REPLAYS_PROBE" not in os.environ


def test_bad_arguments_are_named() -> None:
    with pytest.raises(SystemExit, match="no scenario 'nope'"):
        replays.case("nope", 1)
    with pytest.raises(SystemExit, match=r"--conf takes KEY=VALUE, got 'spark\.x'"):
        replays.pairs(["spark.x"], "--conf")
    assert replays.pairs(["a=1", "b=x=y"], "--env") == {"a": "1", "b": "x=y"}
