"""What one micro-batch of the Spark table-table join reports (plain values: the batch log's
done record holds it, the Dagster layer turns it into metadata)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TableTableReport:
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
    tombstones_out: int = 0
    keys_changed: int = 0
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
    def from_dict(cls, raw: dict[str, Any], **extra: Any) -> TableTableReport:
        versions = {k: None if v is None else (int(v[0]), int(v[1]))
                    for k, v in raw.get("versions", {}).items()}
        return cls(**{**raw, "versions": versions,
                      "event_days_touched": tuple(raw.get("event_days_touched", ())), **extra})
