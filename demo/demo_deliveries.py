"""The demo's interval join (seed 003): orders ⋈ deliveries within three hours, by order id.

Per wave: the deliveries file lands, the landing sensor ingests it (the orders are the source the
rates join reads too, ingested once), the micro-batch sensor runs the join. Each batch's
metadata carries the rows buffered per side, the watermarks per column, the late rows and the
outer rows emitted, as numbers (Dagster plots them over the materializations: the buffer size
per batch)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo.demo_runner import (
    Demo,
    checks_and_nightly_backfill,
    ingest_sources,
    microbatches,
    short_ts,
)


@dataclass
class DeliveriesResult:
    batches: list[dict[str, Any]] = field(default_factory=list)
    checks_before: dict[str, bool] = field(default_factory=dict)
    checks_after: dict[str, bool] = field(default_factory=dict)
    backfill: dict[str, Any] = field(default_factory=dict)


def _wm_text(md: Mapping[str, Any], prefix: str) -> str:
    # A timestamp's metadata value is seconds since the epoch.
    marks = {k[len(prefix):]: v for k, v in md.items() if k.startswith(prefix)}
    return ", ".join(f"{k} {short_ts(round(v * 1000))}" for k, v in sorted(marks.items())) or "-"


def ingest_and_join(demo: Demo, spec: Any, out: DeliveriesResult) -> None:
    """One wave of the interval-join pipeline, driven by its sensors."""
    ingest_sources(demo, (spec.left, spec.right))
    for md in microbatches(demo, spec):
        out.batches.append(md)
        demo.say(f"  {spec.name} batch {md['batch_id']}: {md['batch_rows_in_left']} orders + "
                 f"{md['batch_rows_in_right']} deliveries in, {md['batch_joined_rows']} joined, "
                 f"{md['batch_outer_rows_left']} orders without delivery, {md['batch_late_right']} late "
                 f"deliveries quarantined; buffered {md['batch_buffered_left']} orders / "
                 f"{md['batch_buffered_right']} deliveries")


def summary(demo: Demo, spec: Any, out: DeliveriesResult) -> None:
    demo.say(f"{spec.name}: per batch (buffered rows per side, late rows, outer rows, watermarks):")
    demo.table(f"    {'batch':>5} {'joined':>6} {'outer':>5} {'late':>4} {'buf L':>5} {'buf R':>5}"
               f"  input watermarks -> output watermarks")
    for md in out.batches:
        late = md["batch_late_left"] + md["batch_late_right"]
        demo.table(f"    {md['batch_id']:>5} {md['batch_joined_rows']:>6} {md['batch_outer_rows_left']:>5} "
                   f"{late:>4} {md['batch_buffered_left']:>5} {md['batch_buffered_right']:>5}  "
                   f"{_wm_text(md, 'batch_watermark_in_')} -> {_wm_text(md, 'batch_watermark_out_')}")
    out.checks_before, out.backfill, out.checks_after = checks_and_nightly_backfill(demo, spec)


def land(wave: int, deliveries: list[dict[str, Any]], folder: Path, demo: Demo) -> None:
    from demo.sample_deliveries import write_deliveries

    path = write_deliveries(wave, deliveries, folder)
    demo.say(f"wave {wave}: landed {path.name} ({len(deliveries)} deliveries)")
