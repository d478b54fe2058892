"""What a pipeline's engine reports: plain values (materialization metadata is made of them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunSummary:
    """One micro-batch of a pipeline's join (`skipped`: nothing new, busy, or already done)."""

    batch_id: int | None
    skipped: bool
    skip_reason: str | None = None
    input_versions: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    rows_in: dict[str, int] = field(default_factory=dict)
    rows_out: int = 0
    quarantined: int = 0
    stream_time: int | None = None
    event_days_touched: tuple[str, ...] = ()
    output_version: int | None = None
    # Operator-specific counts (late joined, still buffered, out of order ignored, ...).
    counters: dict[str, int] = field(default_factory=dict)
    # Operator-specific markdown sections (a lateness histogram, ...).
    details: dict[str, str] = field(default_factory=dict)
    # Per-batch measures worth a plot over time (`lateness_p95_s`, ...): name -> number.
    series: dict[str, float] = field(default_factory=dict)
    # Event times worth showing as times (the watermarks per column): name -> epoch ms.
    times: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def rows_in_total(self) -> int:
        return sum(self.rows_in.values())


@dataclass(frozen=True)
class DayDifference:
    before: int = 0
    after: int = 0
    added: int = 0
    removed: int = 0
    changed: int = 0

    @property
    def agrees(self) -> bool:
        return self.added == 0 and self.removed == 0 and self.changed == 0


@dataclass(frozen=True)
class BackfillSummary:
    """A backfill (or, with `dry_run`, a check) of event days: output rows before and after,
    and per day how many rows it added, removed or changed."""

    days: tuple[str, ...]
    rows_in: int
    output_version: int | None
    committed: bool
    per_day: dict[str, DayDifference] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def rows_before(self) -> int:
        return sum(d.before for d in self.per_day.values())

    @property
    def rows_out(self) -> int:
        return sum(d.after for d in self.per_day.values())

    @property
    def rows_added(self) -> int:
        return sum(d.added for d in self.per_day.values())

    @property
    def rows_removed(self) -> int:
        return sum(d.removed for d in self.per_day.values())

    @property
    def rows_changed(self) -> int:
        return sum(d.changed for d in self.per_day.values())

    @property
    def agrees(self) -> bool:
        return all(d.agrees for d in self.per_day.values())


@dataclass(frozen=True)
class CheckSummary:
    """An operator's own check of its output: passed, why, and counts to show."""

    passed: bool
    description: str
    metadata: dict[str, int | str] = field(default_factory=dict)
