"""Synthetic stream/table data for the join benchmarks, written once as Parquet under bench/data/.

A data set is a stream of events and a versioned table (one row per (key, ts), so it reads like
the output of the versioned ingest). Two key distributions:

- uniform: every key is equally likely, for events and for versions alike;
- skewed: `HOT_KEYS` keys hold `HOT_SHARE` of the events and of the versions (the case that
  breaks plain key-partitioned joins), the rest is uniform over the other keys.

Keys are 64-bit ints, timestamps are epoch milliseconds spread over `TIME_SPAN_MS`. Both sides are
stored in ts order (as a topic dump would be) and split into several files so that every engine
reads them in parallel. Generation is deterministic for a given (size, distribution, seed).
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DATA_DIR = Path(__file__).resolve().parent / "data"
TIME_SPAN_MS = 30 * 24 * 3600 * 1000  # thirty days of event time
T0_MS = 1_700_000_000_000
HOT_KEYS = 3
HOT_SHARE = 0.8
VERSIONS_PER_KEY = 10  # uniform case: key count = versions / VERSIONS_PER_KEY
FILES = 8
DISTS = ("uniform", "skewed")


@dataclass(frozen=True)
class DataSet:
    """Where one generated data set lives."""

    name: str
    events: int
    versions: int
    dist: str
    keys: int

    @property
    def root(self) -> Path:
        return DATA_DIR / self.name

    @property
    def events_path(self) -> Path:
        return self.root / "events"

    @property
    def versions_path(self) -> Path:
        return self.root / "versions"

    def glob(self, side: str) -> str:
        return str(self.root / side / "*.parquet")


def parse_count(text: str) -> int:
    """'1m' -> 1_000_000, '100k' -> 100_000, '250' -> 250."""
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    number = text[:-1] if scale != 1 else text
    return int(float(number) * scale)


def parse_size(text: str) -> tuple[int, int]:
    """'1m:100k' -> (events, versions)."""
    events, _, versions = text.partition(":")
    if not versions:
        raise ValueError(f"size must be EVENTS:VERSIONS like 1m:100k, got {text!r}")
    return parse_count(events), parse_count(versions)


def data_set(events: int, versions: int, dist: str) -> DataSet:
    if dist not in DISTS:
        raise ValueError(f"dist must be one of {DISTS}, got {dist!r}")
    keys = max(HOT_KEYS + 1, versions // VERSIONS_PER_KEY)
    return DataSet(f"{dist}_{events}_{versions}", events, versions, dist, keys)


def _draw_keys(rng: np.random.Generator, n: int, keys: int, dist: str) -> np.ndarray:
    if dist == "uniform":
        return rng.integers(0, keys, n, dtype=np.int64)
    hot = rng.random(n) < HOT_SHARE
    out = rng.integers(HOT_KEYS, keys, n, dtype=np.int64)
    out[hot] = rng.integers(0, HOT_KEYS, int(hot.sum()), dtype=np.int64)
    return out


def _write(table: pa.Table, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    step = -(-table.num_rows // FILES)
    for i in range(FILES):
        pq.write_table(table.slice(i * step, step), path / f"part-{i:03d}.parquet")


def generate(ds: DataSet, *, seed: int = 7, force: bool = False) -> DataSet:
    """Write the data set unless it is already there (a `_SUCCESS` marker means complete)."""
    marker = ds.root / "_SUCCESS"
    if marker.exists() and not force:
        return ds
    shutil.rmtree(ds.root, ignore_errors=True)
    rng = np.random.default_rng(seed)

    # Versions: draw (key, ts) pairs and drop duplicates, since the versioned table holds at most
    # one row per (key, ts); draw a few extra so the count stays close to the request.
    vkey = _draw_keys(rng, int(ds.versions * 1.02) + 16, ds.keys, ds.dist)
    vts = T0_MS + rng.integers(0, TIME_SPAN_MS, vkey.size, dtype=np.int64)
    pairs = np.unique(np.stack([vts, vkey]), axis=1)[:, : ds.versions]  # sorted by (ts, key)
    vts, vkey = pairs[0], pairs[1]
    n_versions = vts.size
    versions = pa.table({
        "key": vkey,
        "ts": vts,
        "price": np.round(rng.random(n_versions) * 1000, 2),
        "qty": rng.integers(0, 1000, n_versions, dtype=np.int64),
    })

    ekey = _draw_keys(rng, ds.events, ds.keys, ds.dist)
    ets = np.sort(T0_MS + rng.integers(0, TIME_SPAN_MS, ds.events, dtype=np.int64))
    events = pa.table({
        "event_id": np.arange(ds.events, dtype=np.int64),
        "key": ekey,
        "ts": ets,
        "amount": np.round(rng.random(ds.events) * 100, 2),
    })
    _write(events, ds.events_path)
    _write(versions, ds.versions_path)
    marker.touch()
    return ds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1m:100k", help="comma list of EVENTS:VERSIONS")
    parser.add_argument("--dists", default="uniform,skewed")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    for size in args.sizes.split(","):
        events, versions = parse_size(size)
        for dist in args.dists.split(","):
            ds = generate(data_set(events, versions, dist), force=args.force)
            print(f"{ds.name}: {ds.root}")


if __name__ == "__main__":
    main()
