"""Where the crash tests crash: once in every gap between two commits of a batch."""

from __future__ import annotations

from tests.spark.crash import crash_points


def test_one_crash_per_gap_between_two_commits() -> None:
    writes = ["checkpoints", "output", "quarantine", "state", "checkpoints"]
    assert crash_points(writes) == [
        (0, "before"), (0, "after"),   # nothing written; the plan written
        (1, "before"), (1, "after"),   # every table staged, none committed; the output committed
        (2, "after"), (3, "after"),    # the quarantine, then the state (each 'before' = the 'after' above)
        (4, "before"), (4, "after"),   # the report finished, the done record not written; written
    ]


def test_a_batch_with_one_table_crashes_around_each_write() -> None:
    writes = ["checkpoints", "output", "checkpoints"]
    assert crash_points(writes) == [(i, when) for i in range(3) for when in ("before", "after")]
