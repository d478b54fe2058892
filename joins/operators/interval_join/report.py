"""What one micro-batch of the interval join did (plain values: the batch log keeps it, the
Dagster layer turns it into metadata)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from joins import incremental

SideCounts = dict[str, int]  # "left" / "right" -> rows


def sides(left: int = 0, right: int = 0) -> SideCounts:
    return {"left": left, "right": right}


@dataclass(frozen=True)
class IntervalBatchReport:
    """One batch. Per side: rows in, late rows dropped or quarantined, rows quarantined as
    invalid (a null time), filtered by their side's conditions, out of bounds, buffered and
    evicted, null-padded; buffered rows after the batch. Watermarks by name: the last received
    (input) and the last emitted (output) values."""

    batch_id: int | None
    skipped: bool = False
    skip_reason: str | None = None
    input_versions: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    rows_in: SideCounts = field(default_factory=sides)
    watermark_records: int = 0
    late_dropped: SideCounts = field(default_factory=sides)
    late_quarantined: SideCounts = field(default_factory=sides)
    invalid: SideCounts = field(default_factory=sides)
    filtered: SideCounts = field(default_factory=sides)
    out_of_bounds: SideCounts = field(default_factory=sides)
    buffered: SideCounts = field(default_factory=sides)
    evicted: SideCounts = field(default_factory=sides)
    null_padded: SideCounts = field(default_factory=sides)
    joined_rows: int = 0
    rows_out: int = 0                      # joined + null-padded rows written
    watermarks_emitted: int = 0
    buffered_after: SideCounts = field(default_factory=sides)
    watermarks_in: dict[str, int] = field(default_factory=dict)
    watermarks_out: dict[str, int] = field(default_factory=dict)
    event_days_touched: tuple[str, ...] = ()
    commits: dict[str, int | None] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def quarantined(self) -> int:
        return sum(self.late_quarantined.values()) + sum(self.invalid.values())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], **overrides: Any) -> IntervalBatchReport:
        data = dict(raw)
        data["input_versions"] = {k: None if v is None else tuple(v)
                                  for k, v in data.get("input_versions", {}).items()}
        data["event_days_touched"] = tuple(data.get("event_days_touched", ()))
        data.update(overrides)
        return cls(**data)


def report_of(result: incremental.BatchResult) -> IntervalBatchReport:
    """The operator's report of a runtime result (a run, a re-run, or a skip)."""
    from joins.incremental.reports import report_of_result

    return report_of_result(result, IntervalBatchReport.from_dict, lambda _carry, **kw:
                            IntervalBatchReport(batch_id=None, skipped=True, **kw))
