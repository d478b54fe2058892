"""Demo data: orders (a stream keyed by currency) and currency rates (a versioned table), both
out of order, landed in waves, with a few records that arrive late.

Everything is generated up front from a seed, then written wave by wave into the landing
folders, the way an upstream system would drop files: orders as JSON lines, rates as CSV (one
declared format per source). Files are written under a hidden temporary name and renamed, so a sensor
never sees a half-written file. Arrival order is file-name order, then line order.

What makes the data interesting:

- disorder: inside a wave, records are shuffled by up to `disorder_ms` (the join's grace period
  covers it, so the micro-batches and a backfill agree on these);
- late rate updates: a few updates land one wave after the orders they apply to have already
  been joined (within history retention, so the table stores them): the backfill corrects those
  orders, and the difference report shows how many;
- late orders: a few orders land one wave late, beyond grace (the late policy decides);
- one expired rate (older than stream time - history retention: quarantined, never stored) and
  one bad CSV row (a rate of `n/a`: quarantined with the reason).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from joins.core.time import DAY_MS, day_start_ms

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS

BASE_RATES: dict[str, float] = {"EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": 1.13}


@dataclass(frozen=True)
class SampleConfig:
    seed: int = 7
    start: dt.date = dt.date(2024, 3, 1)
    days: int = 2
    # Waves of 12 h: late rate updates land one wave later, well within one day of retention.
    waves: int = 4
    orders_per_day: int = 160
    rate_interval_ms: int = 2 * HOUR_MS
    disorder_ms: int = 15 * MINUTE_MS
    late_orders: int = 4
    late_rates: int = 3
    currencies: tuple[str, ...] = tuple(BASE_RATES)

    @property
    def start_ms(self) -> int:
        return day_start_ms(self.start)

    @property
    def wave_ms(self) -> int:
        return self.days * DAY_MS // self.waves


@dataclass
class Wave:
    """The records of one landing wave, in arrival order."""

    index: int
    orders: list[dict[str, Any]] = field(default_factory=list)
    rates: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class LandedFiles:
    orders: Path
    rates: Path


def _disordered(records: list[dict[str, Any]], rng: random.Random, disorder_ms: int) -> list[dict[str, Any]]:
    # Sorting by a jittered ts keeps disorder bounded by the jitter (what grace must cover).
    return sorted(records, key=lambda r: r["ts"] + rng.uniform(0, disorder_ms))


def generate(cfg: SampleConfig) -> list[Wave]:
    """All waves, deterministic for a seed."""
    rng = random.Random(cfg.seed)
    waves = [Wave(i) for i in range(cfg.waves)]

    def wave_of(ts: int) -> int:
        return min(cfg.waves - 1, max(0, (ts - cfg.start_ms) // cfg.wave_ms))

    end_ms = cfg.start_ms + cfg.days * DAY_MS
    for currency in cfg.currencies:
        rate = BASE_RATES[currency]
        ts = cfg.start_ms
        while ts < end_ms:
            waves[wave_of(ts)].rates.append({"currency": currency, "rate": round(rate, 6), "ts": ts})
            rate *= 1 + rng.gauss(0, 0.004)
            ts += cfg.rate_interval_ms + rng.randrange(-10 * MINUTE_MS, 10 * MINUTE_MS)
    n_orders = cfg.orders_per_day * cfg.days
    for i in range(n_orders):
        ts = cfg.start_ms + rng.randrange(cfg.days * DAY_MS)
        waves[wave_of(ts)].orders.append({
            "order_id": f"o-{i:05d}", "currency": rng.choice(cfg.currencies),
            "amount": round(rng.uniform(5, 500), 2), "ts": ts})
    for w in waves:
        w.orders = _disordered(w.orders, rng, cfg.disorder_ms)
        w.rates = _disordered(w.rates, rng, cfg.disorder_ms)

    # Late arrivals move from their wave to the next one (appended: they arrive after it).
    for w in range(cfg.waves - 1):
        if w % 2 == 0 and waves[w].rates:
            # Mid-wave rate updates: the orders after them were joined with the previous rate.
            middle = sorted(waves[w].rates, key=lambda r: r["ts"])[len(waves[w].rates) // 3:]
            for rec in rng.sample(middle, min(cfg.late_rates, len(middle))):
                waves[w].rates.remove(rec)
                waves[w + 1].rates.append(rec)
        if w % 2 == 1 and waves[w].orders:
            for rec in rng.sample(waves[w].orders, min(cfg.late_orders, len(waves[w].orders))):
                waves[w].orders.remove(rec)
                waves[w + 1].orders.append(rec)

    last = waves[-1]
    # Older than stream time - history retention by the time it lands: expired, quarantined.
    last.rates.append({"currency": "EUR", "rate": 1.0, "ts": cfg.start_ms + HOUR_MS // 2})
    # A value of the wrong type: the landing reader quarantines the row with the reason.
    last.rates.append({"currency": "CHF", "rate": "n/a", "ts": end_ms - HOUR_MS})
    return waves


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode()


def _csv(records: list[dict[str, Any]], columns: list[str]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for r in records:
        writer.writerow([r[c] for c in columns])
    return out.getvalue().encode()


def write_wave(wave: Wave, *, orders_dir: Path, rates_dir: Path) -> LandedFiles:
    """Land one wave: an orders file (JSON lines) and a rates file (CSV)."""
    orders_dir.mkdir(parents=True, exist_ok=True)
    rates_dir.mkdir(parents=True, exist_ok=True)
    name = f"{wave.index:04d}"
    orders = orders_dir / f"{name}-orders.jsonl"
    _atomic_write(orders, _jsonl(wave.orders))
    rates = rates_dir / f"{name}-rates.csv"
    _atomic_write(rates, _csv(wave.rates, ["currency", "rate", "ts"]))
    return LandedFiles(orders=orders, rates=rates)
