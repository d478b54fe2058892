"""`python -m joins replay FILE --engine spark` for `versioned_table` scenarios.

A batch's puts go through the real ingest (`spark_incremental.ingest_changelog`) into a Delta
versions table, in one call, so the batch's stream time and expiry are decided by the ingest's
prefix scan, not op by op. Every op's answer is then read through the user query path
(`joins.query.versioned`): the table at the batch's commit (Delta time travel), narrowed to the
versions that arrived up to that op, which is what the reference store held when it ran it
(stream time is the largest stored ts, so the narrowed frame carries the op's stream time too).

- a get is `get_in` (a get without `as_of` asks as of the last representable time, which reads
  the latest version: it never expires);
- a put is `expired` when the ingest quarantined it, otherwise its version's validity in
  `history_in`: still valid is `latest`, else `{"valid_to": T}`, the next version's ts.

Keys are `joins.core.keys.key_text` (1 and 1.0 are two keys) in one `key` column; values are
canonical JSON text in one `value` column.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins import lake
from joins.changelog.replay import loads, value_text
from joins.core.keys import key_text
from joins.core.operator import Item
from joins.microbatch import cut_batches
from joins.operators.versioned_table.spec import GetOp, PutOp, VersionedTableOp, VersionedTableSpec
from joins.query.versioned import VersionedTableRef, get_in, history_in, versions_at
from joins.spark.local_rows import local_rows
from joins.versioned.spark_store import ARRIVAL, BATCH_ID, TS_MAX_MS, VersionedDeltaLayout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CHANGELOG_SCHEMA = "key string, value string, ts long, tombstone boolean, arrival long"
SOURCE_ID = "replay"
TABLE_NAME = "replay"


class TableReplay:
    """The versions table (and its ingest quarantine) of one replay under `root`."""

    def __init__(self, spark: SparkSession, spec: VersionedTableSpec, root: str) -> None:
        self.spark = spark
        layout = VersionedDeltaLayout(key_columns=("key",), value_columns=("value",),
                                      history_retention_ms=spec.history_retention_ms)
        self.table = VersionedTableRef(TABLE_NAME, f"{root.rstrip('/')}/versions", layout,
                                       {"key": "string"})
        self.quarantine = f"{root.rstrip('/')}/quarantine"
        self.commit = -1
        # Batch 0 creates the empty table: a get before any put reads it and finds nothing.
        self.put([], batch=0)

    def put(self, puts: Sequence[PutOp], *, batch: int) -> set[int]:
        """Ingest `puts` as batch `batch`; returns the arrival indices the ingest refused."""
        from joins.versioned.ingest import ingest_changelog

        rows = [(key_text(p.key), value_text(p.value), p.ts, p.value is None, p.i) for p in puts]
        report = ingest_changelog(self.spark, local_rows(self.spark, rows, CHANGELOG_SCHEMA),
                                  self.table.layout, versions_path=self.table.path,
                                  quarantine_path=self.quarantine, source_id=SOURCE_ID,
                                  batch_id=batch, rows_at_most=len(rows))
        assert report.versions_commit is not None and report.versions_commit.version is not None
        self.commit = report.versions_commit.version
        if not report.expired:
            return set()
        return {r[ARRIVAL] for r in lake.read_delta(self.spark, self.quarantine, columns=[BATCH_ID, ARRIVAL])
                .where(f"{BATCH_ID} = {batch}").collect()}

    def known_after(self, op: VersionedTableOp) -> DataFrame:
        """The versions at the last commit that had arrived up to `op` (arrival = scenario index)."""
        from pyspark.sql import functions as F

        return versions_at(self.spark, self.table, self.commit).where(F.col(ARRIVAL) <= op.i)

    def answer(self, op: VersionedTableOp, expired: set[int]) -> Item:
        key = {"key": key_text(op.key)}
        if isinstance(op, GetOp):
            as_of = TS_MAX_MS if op.as_of is None else op.as_of
            found = get_in(self.known_after(op), self.table, key, as_of, commit=self.commit)
            if found.value is None:
                return {"get": None}
            return {"get": {"value": loads(found.value["value"]), "valid_from": found.valid_from,
                            "valid_to": found.valid_to}}
        if op.i in expired:
            return {"put": "expired"}
        version = next(v for v in history_in(self.known_after(op), self.table, key)
                       if v.valid_from == op.ts)
        return {"put": "latest" if version.valid_to is None else {"valid_to": version.valid_to}}


def spark_replay(spec: VersionedTableSpec, records: Sequence[VersionedTableOp], batch_size: int | None,
                 metrics: dict[str, int] | None = None) -> list[Item]:
    """Replay `records` `batch_size` ops a batch (None: one batch); one item per op, in arrival
    order, each with `after_input` = the last index of its batch."""
    from joins.spark import get_spark

    items: list[Item] = []
    expired_total = 0
    with tempfile.TemporaryDirectory(prefix="tj-vt-replay-") as tmp:
        replay = TableReplay(get_spark(), spec, tmp)
        for n, batch in enumerate(cut_batches(records, batch_size), start=1):
            puts = [op for op in batch if isinstance(op, PutOp)]
            expired = replay.put(puts, batch=n) if puts else set()
            expired_total += len(expired)
            items.extend({**replay.answer(op, expired), "after_input": batch[-1].i} for op in batch)
    if metrics is not None:
        metrics["put_expired"] = expired_total
    return items
