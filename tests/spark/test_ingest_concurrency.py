"""Two processes ingest one source at once, round after round (issue 9): each with its own
SparkSession (tests/processes.py: two warm processes kept across tests), both asking for the same
files or each for its own new file. Every landed row must be stored exactly once."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from joins.ingest import IngestSource
from joins.ingest.log import IngestLog
from joins.lake import read_delta
from joins.landing import LandingSpec

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROUNDS = 6
ROWS_PER_FILE = 3


def make_source(root: str, kind: str) -> IngestSource:
    spec = LandingSpec.parse({"format": "jsonl", "key_columns": [{"name": "k", "type": "string"}],
                              "value_columns": [{"name": "v", "type": "long"}], "ts_column": "ts",
                              "on_bad_record": "quarantine"})
    return IngestSource(name="src", kind=kind, landing=f"{root}/landing", spec=spec,  # type: ignore[arg-type]
                        table=f"{root}/table", quarantine=f"{root}/quarantine",
                        manifest=f"{root}/manifest", lease=f"{root}/lease",
                        history_retention_ms=10**12 if kind == "table" else None)


def land(folder: str, name: str) -> None:
    """Write under a hidden name, then rename into place: a half-written file is never landed."""
    os.makedirs(folder, exist_ok=True)
    rows = "".join(f'{{"k": "{name}-{i}", "ts": {1000 + i}, "v": {i}}}\n' for i in range(ROWS_PER_FILE))
    tmp = os.path.join(folder, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write(rows)
    os.rename(tmp, os.path.join(folder, name))


def _ingester(root: str, kind: str, mode: str, who: int, barrier: Any) -> None:
    try:
        from joins.ingest import run_ingest
        from joins.spark import get_spark

        spark = get_spark()
        src = make_source(root, kind)
        for r in range(ROUNDS):
            if mode == "same":
                if who == 0:
                    land(src.landing, f"r{r:02d}-a.jsonl")
                    land(src.landing, f"r{r:02d}-b.jsonl")
                barrier.wait()
                run_ingest(spark, src, wait_s=300)   # both take whatever is pending
            else:
                name = f"r{r:02d}-p{who}.jsonl"
                land(src.landing, name)
                barrier.wait()
                run_ingest(spark, src, requested=[name], wait_s=300)
            barrier.wait()
    except BaseException:
        barrier.abort()  # the other process stops waiting; this one's traceback fails the test
        raise


@pytest.mark.parametrize(("mode", "kind"), [("different", "table"), ("same", "stream")])
def test_two_processes_ingesting_one_source_store_every_row_once(spark: Any, tmp_path: Path,
                                                                 mode: str, kind: str,
                                                                 two_processes: Any) -> None:
    root = str(tmp_path)
    barrier = two_processes.barrier(2)
    calls = [p.call(_ingester, root, kind, mode, who, barrier) for who, p in enumerate(two_processes)]
    for call in calls:
        call.result(1200)

    src = make_source(root, kind)
    landed = sorted(n for n in os.listdir(src.landing) if not n.startswith("."))
    assert len(landed) == 2 * ROUNDS
    want = sorted(f"{n}-{i}" for n in landed for i in range(ROWS_PER_FILE))
    table = read_delta(spark, src.table)
    keys = Counter(r["k"] for r in table.select("k").collect())
    assert sorted(keys) == want
    assert [k for k, n in keys.items() if n != 1] == []        # nothing doubled
    plans = IngestLog(src.manifest, source_id=src.name).log.plans()
    assert sorted(n for p in plans for n, _ in p.carry["files"]) == landed   # each file planned once
    assert [p.batch_id for p in plans] == list(range(len(plans)))           # one plan per batch id
    assert not Path(src.quarantine).exists()
