"""Demo data of the foreign-key join: which customer each order belongs to, as a changelog of
order updates (JSON lines) keyed by order id, whose `customer_id` names a customer of
`sample_accounts.py` (the right side reads the same customer files).

- wave 0 creates the orders, each with a customer (one with none yet: a null foreign key);
- later waves move orders to another customer (an unsubscribe and a subscribe), change
  amounts, cancel an order (`cancelled`: a delete) and give the customer-less order one;
- in every later wave the first update moves an order away from a customer whose change comes
  later in that wave's customer file: a micro-batch interleaves both files by arrival index,
  so the customer's fan-out still answers the subscription the order has just left, and that
  response is discarded as stale (where the wave has such a customer with an order);
- in every later wave one update is older than its order's latest one (out of order: a
  versioned side ignores it).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from demo.sample_data import HOUR_MS, SampleConfig, _atomic_write, _jsonl

ORDER_COLUMNS = ["order_id", "customer_id", "amount", "cancelled", "ts"]


def generate_order_customers(cfg: SampleConfig, customer_waves: list[list[dict[str, Any]]], *,
                             orders: int = 40, customers: int = 24) -> list[list[dict[str, Any]]]:
    """The order updates of every wave, in arrival order (deterministic for the seed), given
    the customer updates of every wave in arrival order."""
    rng = random.Random(cfg.seed + 2)
    ids = [f"o-{n:05d}" for n in range(orders)]
    people = [f"c{n:03d}" for n in range(1, customers + 1)]
    owner: dict[str, str | None] = {}
    latest: dict[str, int] = {}
    waves: list[list[dict[str, Any]]] = [[] for _ in range(cfg.waves)]

    def update(oid: str, ts: int, customer: str | None, *, cancelled: bool = False) -> dict[str, Any]:
        latest[oid] = max(ts, latest.get(oid, ts))
        if not cancelled:
            owner[oid] = customer
        return {"order_id": oid, "customer_id": None if cancelled else customer,
                "amount": None if cancelled else round(rng.uniform(5, 500), 2),
                "cancelled": cancelled, "ts": ts}

    t0 = cfg.start_ms
    for oid in ids:
        customer = None if oid == ids[-1] else rng.choice(people)
        waves[0].append(update(oid, t0 + rng.randrange(2 * HOUR_MS), customer))
    for index in range(1, cfg.waves):
        wave, base = waves[index], t0 + index * cfg.wave_ms
        live = [o for o in ids[:-1] if o in owner]
        movers = rng.sample(live, 5)
        changed = _changed_later(customer_waves, index)
        stale = [o for o in live if owner[o] in changed]
        if stale:  # moved away first: the customer's later change answers it stale
            movers = [stale[0], *(o for o in movers if o != stale[0])][:5]
        for oid in movers:
            other = rng.choice([p for p in people if p != owner[oid]])
            wave.append(update(oid, base + rng.randrange(cfg.wave_ms // 2), other))
        for oid in rng.sample([o for o in live if o not in movers], 2):
            wave.append(update(oid, base + rng.randrange(cfg.wave_ms), owner[oid]))
        if index == 1:
            wave.append(update(ids[-1], base + HOUR_MS, rng.choice(people)))
        if index == cfg.waves - 1:
            gone = rng.choice([o for o in live if o not in movers])
            wave.append(update(gone, base + cfg.wave_ms - HOUR_MS, None, cancelled=True))
            owner.pop(gone)
        late = rng.choice([o for o in live if o not in movers])
        wave.append({"order_id": late, "customer_id": rng.choice(people), "amount": 1.0,
                     "cancelled": False, "ts": latest[late] - HOUR_MS})
    return waves


def _changed_later(customer_waves: list[list[dict[str, Any]]], index: int) -> list[str]:
    """Customers with an in-order, non-delete update at arrival position 1 or later of wave
    `index` (a versioned side applies it, so it fans out), in arrival order."""
    latest: dict[str, int] = {}
    out: list[str] = []
    for w, records in enumerate(customer_waves[:index + 1]):
        for position, r in enumerate(records):
            cid = r["customer_id"]
            in_order = r["ts"] >= latest.get(cid, r["ts"])
            latest[cid] = max(r["ts"], latest.get(cid, r["ts"]))
            if w == index and position >= 1 and in_order and not r["deleted"]:
                out.append(cid)
    return out


def write_order_updates(index: int, records: list[dict[str, Any]], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{index:04d}-order-updates.jsonl"
    _atomic_write(path, _jsonl([{k: r[k] for k in ORDER_COLUMNS} for r in records]))
    return path
