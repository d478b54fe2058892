"""Demo data of the interval join: deliveries of the demo's orders, landed in waves as JSON lines.

Most orders get one delivery 20 minutes to 2 h 50 min after the order (inside the join's three
hours); some get none, or one too late to count (after three hours): those orders come out
null-padded (a left join). A few deliveries land one wave late, far behind the deliveries'
watermark: the join quarantines them as late, with the reason, and the agreement check flags
their day until a backfill joins them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo.sample_data import MINUTE_MS, SampleConfig, Wave, _atomic_write, _disordered, _jsonl

COURIERS = ("ana", "ben", "chen", "dara")


@dataclass(frozen=True)
class DeliveryConfig:
    seed: int = 11
    delivered: float = 0.8        # share of orders delivered within the bound
    too_late: float = 0.05        # share delivered after the bound (no match)
    late_deliveries: int = 3      # deliveries that land one wave late (quarantined)


@dataclass
class DeliveryWaves:
    waves: list[list[dict[str, Any]]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(len(w) for w in self.waves)


def generate_deliveries(cfg: SampleConfig, orders: list[Wave],
                        dcfg: DeliveryConfig | None = None) -> DeliveryWaves:
    """Deliveries of the orders of `orders` (the demo's waves), deterministic for a seed."""
    d = dcfg or DeliveryConfig()
    rng = random.Random(d.seed)
    waves: list[list[dict[str, Any]]] = [[] for _ in orders]

    def wave_of(ts: int) -> int:
        return min(len(waves) - 1, max(0, (ts - cfg.start_ms) // cfg.wave_ms))

    all_orders = sorted((o for w in orders for o in w.orders), key=lambda o: o["order_id"])
    for n, order in enumerate(all_orders):
        draw = rng.random()
        if draw < d.delivered:
            after = rng.randrange(20 * MINUTE_MS, 170 * MINUTE_MS)
        elif draw < d.delivered + d.too_late:
            after = rng.randrange(200 * MINUTE_MS, 300 * MINUTE_MS)
        else:
            continue
        ts = order["ts"] + after
        waves[wave_of(ts)].append({"delivery_id": f"d-{n:05d}", "order_id": order["order_id"],
                                   "courier": rng.choice(COURIERS), "ts": ts})
    waves = [_disordered(w, rng, cfg.disorder_ms) for w in waves]
    for w in range(len(waves) - 1):
        early = [r for r in waves[w] if r["ts"] < cfg.start_ms + (w + 1) * cfg.wave_ms - 6 * 60 * MINUTE_MS]
        for rec in rng.sample(early, min(d.late_deliveries, len(early))) if w == 0 else []:
            waves[w].remove(rec)
            waves[w + 1].append(rec)
    return DeliveryWaves(waves)


def write_deliveries(index: int, records: list[dict[str, Any]], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{index:04d}-deliveries.jsonl"
    _atomic_write(path, _jsonl(records))
    return path
