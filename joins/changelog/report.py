"""What one micro-batch of a join of two changelog tables reports (the table-table join, the
foreign-key join): plain values, which the batch log's done record holds and the Dagster layer
turns into metadata. Each join's report adds its own counters to these."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Self

from joins.changelog.expiry import stream_time_key
from joins.changelog.result import SIDES

if TYPE_CHECKING:
    from joins.incremental import BatchPlan, BatchResult


@dataclass(frozen=True)
class ChangelogJoinReport:
    """One micro-batch (or, with `skipped`, that there was nothing to do).

    `out_of_order_ignored` and `expired` are per side: a versioned side's update older than the
    key's latest ts, and an update beyond the side's history retention (quarantined too when
    the join is told to)."""

    batch_id: int | None
    skipped: bool = False
    skip_reason: str | None = None
    versions: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    rows_in: dict[str, int] = field(default_factory=dict)
    rows_out: int = 0
    out_of_order_ignored: dict[str, int] = field(default_factory=dict)
    expired: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    stream_time: dict[str, int | None] = field(default_factory=dict)
    event_days_touched: tuple[str, ...] = ()
    commits: dict[str, int | None] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def join_stream_time(self) -> int | None:
        """The largest ts either side has seen."""
        known = [t for t in self.stream_time.values() if t is not None]
        return max(known) if known else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("commits", "timings", "skipped", "skip_reason"):
            out.pop(name)
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any], **extra: Any) -> Self:
        versions = {k: None if v is None else (int(v[0]), int(v[1]))
                    for k, v in raw.get("versions", {}).items()}
        return cls(**{**raw, "versions": versions,
                      "event_days_touched": tuple(raw.get("event_days_touched", ())), **extra})

    @classmethod
    def of(cls, result: BatchResult) -> Self:
        """What a call of the runtime did: the batch's report from its done record (a re-run
        batch's too), or a skip with the stream times the last batch carried."""
        from joins.incremental.reports import report_of_result

        return report_of_result(result, cls.from_dict, lambda carry, **kw: cls(
            batch_id=None, skipped=True,
            stream_time={s: carry.get(stream_time_key(s)) for s in SIDES}, **kw))


def consumed_versions(plan: BatchPlan) -> dict[str, tuple[int, int] | None]:
    """Each side's Delta versions the batch read (None: no new commit)."""
    return {s: None if plan.ranges[s].empty else (plan.ranges[s].first, plan.ranges[s].last)
            for s in SIDES}
