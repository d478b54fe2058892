"""Endless demo data for the live demo: orders and currency rates, one landing wave at a time.

Each wave covers the next `wave_ms` of event time (an hour by default, so a few seconds of wall
time move the pipeline through a day in minutes) and, like upstream systems do, it is messy:

- out of order within grace: records are shuffled by up to `disorder_ms` (the join's grace
  period covers this, micro-batches and backfills agree);
- late rate corrections: every `correction_every` waves a rate update for some hours ago lands
  (within history retention, so it is stored): orders already joined with the previous rate
  would now get this one, so their event day is stale until a backfill;
- late orders: every `late_order_every` waves an order from hours ago (beyond grace) lands;
- bad rows: every `bad_every` waves a rate of `n/a` and an order whose amount is not a number
  (quarantined with the reason);
- expired rates: every `expired_every` waves a rate older than stream time - history retention.

Deterministic for a seed; the waves are written as the batch demo writes them
(`sample_data.write_wave`: rename into place, so a sensor never sees half a file).
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from typing import Any

from demo.sample_data import BASE_RATES, HOUR_MS, MINUTE_MS, Wave
from joins.core.time import day_start_ms


@dataclass(frozen=True)
class LiveConfig:
    seed: int = 11
    start: dt.date = dt.date(2024, 3, 1)
    wave_ms: int = HOUR_MS
    orders_per_wave: int = 8
    rate_interval_ms: int = 20 * MINUTE_MS
    disorder_ms: int = 15 * MINUTE_MS
    correction_every: int = 4
    late_order_every: int = 3
    bad_every: int = 5
    expired_every: int = 7
    history_retention_ms: int = 24 * HOUR_MS


@dataclass
class LiveGenerator:
    """The waves of an endless landing stream (`next_wave`)."""

    cfg: LiveConfig = field(default_factory=LiveConfig)
    index: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.cfg.seed)
        self.rates = dict(BASE_RATES)
        self.next_rate = dict.fromkeys(BASE_RATES, day_start_ms(self.cfg.start))
        self.orders = 0

    @property
    def wave_start(self) -> int:
        return day_start_ms(self.cfg.start) + self.index * self.cfg.wave_ms

    def _rate(self, currency: str, ts: int) -> dict[str, Any]:
        self.rates[currency] *= 1 + self.rng.gauss(0, 0.004)
        return {"currency": currency, "rate": round(self.rates[currency], 6), "ts": ts}

    def _order(self, ts: int, amount: Any = None) -> dict[str, Any]:
        self.orders += 1
        return {"order_id": f"live-{self.orders:06d}", "currency": self.rng.choice(list(BASE_RATES)),
                "amount": round(self.rng.uniform(5, 500), 2) if amount is None else amount, "ts": ts}

    def next_wave(self) -> Wave:
        cfg, rng = self.cfg, self.rng
        start, end = self.wave_start, self.wave_start + cfg.wave_ms
        wave = Wave(self.index)
        for currency in BASE_RATES:
            while self.next_rate[currency] < end:
                wave.rates.append(self._rate(currency, self.next_rate[currency]))
                self.next_rate[currency] += cfg.rate_interval_ms + rng.randrange(-5 * MINUTE_MS,
                                                                                 5 * MINUTE_MS)
        wave.orders = [self._order(start + rng.randrange(cfg.wave_ms))
                       for _ in range(cfg.orders_per_wave)]
        # Disorder within grace: sort by a jittered ts.
        for records in (wave.orders, wave.rates):
            records.sort(key=lambda r: r["ts"] + rng.uniform(0, cfg.disorder_ms))
        n = self.index + 1
        if n % cfg.correction_every == 0 and self.index > 6:
            # A correction from hours ago, still within history retention: stored, and orders
            # joined since that time would now get it.
            ts = start - rng.randrange(3 * HOUR_MS, 6 * HOUR_MS)
            wave.rates.append(self._rate(rng.choice(list(BASE_RATES)), ts))
        if n % cfg.late_order_every == 0 and self.index > 2:
            wave.orders.append(self._order(start - rng.randrange(HOUR_MS, 3 * HOUR_MS)))
        if n % cfg.bad_every == 0:
            wave.rates.append({"currency": "CHF", "rate": "n/a", "ts": end - MINUTE_MS})
            wave.orders.append(self._order(end - MINUTE_MS, amount="twelve"))
        if n % cfg.expired_every == 0 and start - cfg.history_retention_ms > day_start_ms(cfg.start):
            wave.rates.append({"currency": "EUR", "rate": 1.0,
                               "ts": start - cfg.history_retention_ms - 2 * HOUR_MS})
        self.index += 1
        return wave
