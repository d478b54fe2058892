"""What a pipeline looks like right now, for people watching it: output rows per event day,
which days have data, how far the join trails its inputs, what waits in the landing folders.

Every answer here reads Delta logs, landing folder listings and the join's batch log only (no
Spark job), so sensors, observations and run metadata can afford it on every tick. They work
for any operator: the output table is partitioned by event day (`event_date`) and every input
table stores its event time as `ts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins import lake
from joins.core.time import event_day

if TYPE_CHECKING:
    from joins.pipeline.spec import PipelineInput, PipelineLayout, SourceLayout

EVENT_DATE = "event_date"
TS = "ts"


def day_rows(layout: PipelineLayout) -> dict[str, int | None]:
    """Output rows per event day, now (None for a day whose files carry no row count)."""
    summary = lake.table_summary(layout.output, partition_column=EVENT_DATE)
    return {} if summary is None else dict(sorted(summary.rows_by_partition.items()))


def batch_day_rows(layout: PipelineLayout, output_version: int | None) -> dict[str, int | None]:
    """Rows one commit (a micro-batch's output commit) wrote per event day."""
    if output_version is None:
        return {}
    return lake.commit_rows_by_partition(layout.output, output_version, EVENT_DATE)


def data_days(layout: PipelineLayout, stream_time: int | None) -> tuple[str, str] | None:
    """The first and last event day the pipeline has data for: from the first day of its output
    or of its inputs' events (a join added over existing data starts there, even where that day
    joined nothing), up to the day of the join's stream time (the buffer may hold records of a
    day not written yet). None: nothing was joined yet."""
    days = [d for d in day_rows(layout)]
    if stream_time is not None:
        days.append(event_day(stream_time))
    if not days:
        return None
    oldest = oldest_event_time(layout)
    if oldest is not None:
        days.append(event_day(oldest))
    return min(days), max(days)


def oldest_event_time(layout: PipelineLayout) -> int | None:
    """The smallest event time stored in an input whose records become output rows (events and
    changelogs; a versioned lookup table's history is not the join's days), from file
    statistics."""
    return _input_time(layout, "min", skip_versioned=True)


def _input_time(layout: PipelineLayout, bound: str, *, skip_versioned: bool = False) -> int | None:
    """The min or max event time over the inputs' tables, from file statistics (no Spark)."""
    found: list[int] = []
    for item in layout.spec.pipeline_inputs():
        if skip_versioned and item.kind == "versioned":
            continue
        summary = lake.table_summary(layout.input_table(item.role), columns=[TS])
        value = None if summary is None else getattr(summary, bound).get(TS)
        if isinstance(value, int):
            found.append(value)
    if not found:
        return None
    return min(found) if bound == "min" else max(found)


@dataclass(frozen=True)
class Progress:
    """Where the join stands in event time.

    `watermark`: stream time minus the hold-back (grace): output rows before it are final, short
    of late records. `newest_input`: the largest event time landed in any input table. Their
    difference, `lag_ms`, is how far the join's final output trails its inputs in event time:
    about the grace period when micro-batches keep up, growing when they fall behind.
    """

    stream_time: int | None
    hold_back_ms: int
    newest_input: int | None
    held_rows: int | None = None        # None: the join holds nothing back (no buffer table)
    oldest_held: int | None = None
    newest_held: int | None = None

    @property
    def watermark(self) -> int | None:
        return None if self.stream_time is None else self.stream_time - self.hold_back_ms

    @property
    def lag_ms(self) -> int | None:
        if self.watermark is None or self.newest_input is None:
            return None
        return max(0, self.newest_input - self.watermark)


def newest_input_time(layout: PipelineLayout) -> int | None:
    """The largest event time stored in any input table (from file statistics)."""
    return _input_time(layout, "max")


def progress(layout: PipelineLayout, stream_time: int | None) -> Progress:
    spec = layout.spec
    buffer = spec.held_back_table(layout)
    held = oldest = newest = None
    if buffer is not None:
        summary = lake.table_summary(buffer, columns=[TS])
        held = 0 if summary is None else summary.rows
        if summary is not None and summary.rows:
            oldest, newest = summary.min.get(TS), summary.max.get(TS)
    return Progress(stream_time=stream_time, hold_back_ms=spec.hold_back_ms(),
                    newest_input=newest_input_time(layout), held_rows=held,
                    oldest_held=oldest, newest_held=newest)


@dataclass(frozen=True)
class LandingStatus:
    """A landing folder: what landed, what the ingest has taken (read or quarantined whole) and
    what waits for the next ingest run."""

    folder: str
    files: int
    taken: int
    pending: tuple[str, ...]
    quarantined_files: int
    newest_file: str | None
    # A catalog-named Delta source no ingest run has resolved yet: what landed is unknown
    # until one does (joins.ingest.catalog).
    unresolved: bool = False


def landing_status(layout: SourceLayout, item: PipelineInput) -> LandingStatus:
    from joins.ingest import list_landing
    from joins.ingest.catalog import is_unresolved
    from joins.ingest.delta_source import landed_versions
    from joins.ingest.log import IngestLog

    folder = layout.landing(item.source)
    if is_unresolved(folder):
        return LandingStatus(folder=folder, files=0, taken=0, pending=(), quarantined_files=0,
                             newest_file=None, unresolved=True)
    # A Delta table's committed versions are what has landed (joins.ingest.delta_source).
    landed = landed_versions(folder) if item.source.format == "delta" else list_landing(folder)
    state = IngestLog(layout.manifest(item.source), source_id=item.source.name).state()
    taken, quarantined = state.taken, len(state.quarantined)
    return LandingStatus(folder=folder, files=len(landed), taken=len(taken & set(landed)),
                         pending=tuple(f for f in landed if f not in taken),
                         quarantined_files=quarantined, newest_file=landed[-1] if landed else None)
