"""Demo data of the second pipeline: customers (JSON lines) and their accounts (CSV), two
versioned changelogs keyed by customer id, landed in waves with updates out of order.

- wave 0 creates the customers and most of their accounts;
- later waves move customers between countries, change balances, close accounts (`closed`:
  a delete) and delete a customer (`deleted`);
- out of order: in every wave after the first a few updates carry a ts older than the key's
  latest one (a versioned side ignores them: no result; the temporal history keeps them);
- one account update older than the accounts' stream time minus history retention lands in the
  last wave: expired, counted and quarantined by the join.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo.sample_data import HOUR_MS, MINUTE_MS, SampleConfig, _atomic_write, _csv, _jsonl

COUNTRIES = ("NL", "FR", "DE", "BE")
CUSTOMER_COLUMNS = ["customer_id", "name", "country", "deleted", "ts"]
ACCOUNT_COLUMNS = ["customer_id", "balance", "status", "closed", "ts"]


@dataclass
class AccountsWave:
    index: int
    customers: list[dict[str, Any]] = field(default_factory=list)
    accounts: list[dict[str, Any]] = field(default_factory=list)


def generate_accounts(cfg: SampleConfig, *, customers: int = 24) -> list[AccountsWave]:
    """All waves, deterministic for the seed; `cfg.waves` waves over `cfg.days` days."""
    rng = random.Random(cfg.seed + 1)
    waves = [AccountsWave(i) for i in range(cfg.waves)]
    ids = [f"c{n:03d}" for n in range(1, customers + 1)]
    t0 = cfg.start_ms
    latest: dict[tuple[str, str], int] = {}

    def customer(cid: str, ts: int, *, country: str | None = None, deleted: bool = False) -> dict[str, Any]:
        return {"customer_id": cid, "name": None if deleted else f"customer {cid[1:]}",
                "country": None if deleted else country, "deleted": deleted, "ts": ts}

    def account(cid: str, ts: int, *, balance: float | None = None, closed: bool = False) -> dict[str, Any]:
        return {"customer_id": cid, "balance": None if closed else balance,
                "status": None if closed else ("gold" if (balance or 0) > 500 else "standard"),
                "closed": closed, "ts": ts}

    country = {cid: rng.choice(COUNTRIES) for cid in ids}
    for cid in ids:
        ts = t0 + rng.randrange(2 * HOUR_MS)
        waves[0].customers.append(customer(cid, ts, country=country[cid]))
        latest[("c", cid)] = ts
        if rng.random() < 0.85:
            ts = t0 + rng.randrange(3 * HOUR_MS)
            waves[0].accounts.append(account(cid, ts, balance=round(rng.uniform(10, 900), 2)))
            latest[("a", cid)] = ts
    for w in waves[1:]:
        base = t0 + w.index * cfg.wave_ms
        for cid in rng.sample(ids, 5):
            country[cid] = rng.choice([c for c in COUNTRIES if c != country[cid]])
            ts = base + rng.randrange(cfg.wave_ms)
            w.customers.append(customer(cid, ts, country=country[cid]))
            latest[("c", cid)] = max(ts, latest[("c", cid)])
        for cid in rng.sample(ids, 6):
            ts = base + rng.randrange(cfg.wave_ms)
            closed = rng.random() < 0.15
            w.accounts.append(account(cid, ts, balance=round(rng.uniform(10, 900), 2), closed=closed))
            latest[("a", cid)] = max(ts, latest.get(("a", cid), ts))
        # Out of order: older than the key's latest ts when it lands (ignored by a versioned side).
        for cid in rng.sample(ids, 2):
            ts = latest[("c", cid)] - rng.randrange(MINUTE_MS, HOUR_MS)
            w.customers.append(customer(cid, ts, country=rng.choice(COUNTRIES)))
        for cid in rng.sample([c for c in ids if ("a", c) in latest], 2):
            ts = latest[("a", cid)] - rng.randrange(MINUTE_MS, HOUR_MS)
            w.accounts.append(account(cid, ts, balance=1.0))
        rng.shuffle(w.customers)
        rng.shuffle(w.accounts)
    gone = rng.choice(ids)
    last = waves[-1]
    last.customers.append(customer(gone, t0 + cfg.days * 24 * HOUR_MS - HOUR_MS, deleted=True))
    # Beyond the accounts' history retention (two days) when it lands: expired, quarantined.
    last.accounts.append(account(ids[0], t0 - 24 * HOUR_MS, balance=42.0))
    return waves


def write_accounts_wave(wave: AccountsWave, *, customers_dir: Path, accounts_dir: Path) -> tuple[Path, Path]:
    customers_dir.mkdir(parents=True, exist_ok=True)
    accounts_dir.mkdir(parents=True, exist_ok=True)
    name = f"{wave.index:04d}"
    customers = customers_dir / f"{name}-customers.jsonl"
    _atomic_write(customers, _jsonl([{k: r[k] for k in CUSTOMER_COLUMNS} for r in wave.customers]))
    accounts = accounts_dir / f"{name}-accounts.csv"
    _atomic_write(accounts, _csv(wave.accounts, ACCOUNT_COLUMNS))
    return customers, accounts
