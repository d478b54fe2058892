"""What one micro-batch of the Spark foreign-key join reports: the counters every join of two
changelog tables reports (`joins.changelog.report`) and the subscription protocol's traffic."""

from __future__ import annotations

from dataclasses import dataclass

from joins.changelog.report import ChangelogJoinReport


@dataclass(frozen=True)
class FkJoinReport(ChangelogJoinReport):
    """Protocol traffic: `subscriptions_sent` (messages the batch's left updates sent),
    `subscriptions` (live subscriptions after the batch), `answers` (responses to
    subscriptions), `fan_out` (responses the batch's right updates sent to subscribers),
    `stale_discarded` (responses whose hash was no longer the current left value's),
    `rows_out` (results, after compaction to the last per key). Updates that produced nothing:
    `out_of_order_ignored` and `expired` per side, `null_foreign_key_skipped` (inner join)."""

    subscriptions_sent: int = 0
    subscriptions: int = 0
    answers: int = 0
    fan_out: int = 0
    stale_discarded: int = 0
    not_propagated: int = 0
    null_foreign_key_skipped: int = 0
