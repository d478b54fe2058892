"""`python -m joins replay FILE --engine spark` for `stream_table_join` scenarios.

The scenario's records are cut into micro-batches in arrival order; each batch's table records
are landed in the table source (the versioned Delta table through its own ingest, or an
unversioned changelog), its stream records in the stream source, and `run_microbatch` runs the
batch. Items come back in the reference engine's emission order: the output table records, per
row, the arrival index it was emitted after (`_emit_seq`) and the quarantine table the late
record's own index, so sorting a batch's rows by (emitted after, ts, arrival) reproduces it.

Keys and values are JSON in the scenario; in the tables keys are `joins.core.keys.key_text`, so
that two keys are equal strings in a Spark join exactly when the reference engine takes them as
one key (value and JSON type: 1 and 1.0 are two keys).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from joins import lake
from joins.core.keys import key_text
from joins.core.operator import Item
from joins.core.time import day_of
from joins.microbatch import cut_batches
from joins.operators.stream_table_join.columns import BATCH_ID, EMIT_SEQ, REASON, JoinColumns
from joins.operators.stream_table_join.reference import METRIC_NAMES
from joins.operators.stream_table_join.spec import StreamTableJoinSpec, StreamTableRecord
from joins.operators.stream_table_join.state import JoinPaths
from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The stream source of a replay: the stream value as JSON text, plus the table key read out of
# it (config.table_key) in a column of its own.
LOOKUP_KEY = "lookup_key"
REPLAY_COLUMNS = JoinColumns(stream_values=("value",), table_key_column=LOOKUP_KEY,
                             table_values=("value",))
STREAM_SCHEMA = "key string, value string, ts long, event_date date, _seq long, lookup_key string"
CHANGELOG_SCHEMA = "key string, value string, ts long, tombstone boolean, arrival long"
SOURCE_ID = "replay"


def value_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def _land_stream(spark: SparkSession, spec: StreamTableJoinSpec, records: Sequence[StreamTableRecord],
                 path: str) -> None:
    rows = []
    for r in records:
        lookup = r.key if spec.table_key is None else (
            spec.lookup_key(r.key, r.value, index=r.i) if r.value is not None else None)
        rows.append((key_text(r.key), value_text(r.value), r.ts,
                     None if r.ts is None else day_of(r.ts), r.i, key_text(lookup)))
    lake.append_rows(spark, path, rows, STREAM_SCHEMA, partition_by=["event_date"])


def _changelog_rows(records: Sequence[StreamTableRecord]) -> list[tuple[Any, ...]]:
    return [(key_text(r.key), value_text(r.value), r.ts, r.value is None, r.i) for r in records]


def _layout(spec: StreamTableJoinSpec) -> Any:
    from joins.versioned.spark_store import VersionedDeltaLayout

    return VersionedDeltaLayout(key_columns=("key",), value_columns=("value",),
                                history_retention_ms=spec.table.history_retention_ms or 0)


def _land_table(spark: SparkSession, spec: StreamTableJoinSpec, records: Sequence[StreamTableRecord],
                *, table_source: str, table_quarantine: str, batch: int) -> int:
    """Land a batch's table records; returns how many puts the versioned table refused."""
    if not spec.table.versioned:
        lake.append_rows(spark, table_source, _changelog_rows(records), CHANGELOG_SCHEMA)
        return 0
    rows = _changelog_rows(records)
    from joins.versioned.ingest import ingest_changelog

    report = ingest_changelog(spark, local_rows(spark, rows, CHANGELOG_SCHEMA), _layout(spec),
                              versions_path=table_source, quarantine_path=table_quarantine,
                              source_id=SOURCE_ID, batch_id=batch, rows_at_most=len(rows))
    return report.expired


def _item(row: Any) -> Item:
    table_value = row["table_value"]
    return {"key": _loads(row["key"]),
            "value": [_loads(row["value"]), None if table_value is None else _loads(table_value)],
            "ts": row["ts"]}


def _quarantine_item(row: Any) -> Item:
    return {"quarantined": {"key": _loads(row["key"]), "value": _loads(row["value"]), "ts": row["ts"]},
            "reason": row[REASON]}


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _read_rows(spark: SparkSession, path: str, columns: list[str]) -> list[Any]:
    if not lake.table_exists(path):
        return []
    # The replay's output is a handful of rows; collecting it is what the command is for.
    return lake.read_delta(spark, path, columns=columns).collect()


class ReplayLake:
    """The Delta tables of one replay under `root`: the stream source, the table source (and
    its ingest quarantine) and the join's own tables. Tests use it to land scenario records
    batch by batch and to read the join's items back."""

    def __init__(self, spark: SparkSession, spec: StreamTableJoinSpec, root: str, *,
                 create: bool = True) -> None:
        self.spark = spark
        self.spec = spec
        self.root = root.rstrip("/")
        self.paths = JoinPaths(f"{self.root}/join")
        self.stream_source = f"{self.root}/stream"
        self.table_source = f"{self.root}/table"
        self.table_quarantine = f"{self.root}/table_quarantine"
        if create:
            # Empty sources first: the join reads their schemas before the first row lands.
            _land_stream(spark, spec, [], self.stream_source)
            _land_table(spark, spec, [], table_source=self.table_source,
                        table_quarantine=self.table_quarantine, batch=0)

    def land(self, records: Sequence[StreamTableRecord], batch: int) -> dict[str, int]:
        """Land one batch's records (`batch` >= 1 numbers the table ingest); returns the table
        records the sources did not take (`table_skipped_null_key`, `table_expired`)."""
        table = [r for r in records if r.side == "table"]
        kept = [r for r in table if r.key is not None]
        counts = {"table_skipped_null_key": len(table) - len(kept), "table_expired": 0}
        if kept:
            counts["table_expired"] = _land_table(
                self.spark, self.spec, kept, table_source=self.table_source,
                table_quarantine=self.table_quarantine, batch=batch)
        stream = [r for r in records if r.side == "stream"]
        if stream:
            _land_stream(self.spark, self.spec, stream, self.stream_source)
        return counts

    def run(self, **kwargs: Any) -> Any:
        """`run_microbatch` on this lake's sources."""
        from joins.operators.stream_table_join.spark_incremental import run_microbatch

        return run_microbatch(self.spark, self.spec, self.paths, stream_source=self.stream_source,
                              table_source=self.table_source, columns=REPLAY_COLUMNS, **kwargs)

    def ordered_rows(self) -> list[tuple[int | None, int | None, int, int, Item]]:
        """(batch id, emitted after, ts, arrival, item) of every output and quarantine row,
        sorted: the emission order of the micro-batches."""
        ordered: list[tuple[int | None, int | None, int, int, Item]] = []
        for row in _read_rows(self.spark, self.paths.output,
                              ["key", "value", "ts", "_seq", "table_value", EMIT_SEQ, BATCH_ID]):
            ordered.append((row[BATCH_ID], row[EMIT_SEQ], row["ts"], row["_seq"], _item(row)))
        for row in _read_rows(self.spark, self.paths.quarantine,
                              ["key", "value", "ts", "_seq", REASON, BATCH_ID]):
            ordered.append((row[BATCH_ID], row["_seq"], row["ts"], row["_seq"],
                            _quarantine_item(row)))
        ordered.sort(key=lambda t: tuple(-1 if v is None else v for v in t[:4]))
        return ordered


def spark_replay(spec: StreamTableJoinSpec, records: Sequence[StreamTableRecord],
                 batch_size: int | None, metrics: dict[str, int] | None = None) -> list[Item]:
    """Replay `records` through `run_microbatch`, `batch_size` records a batch (None: one
    batch); items carry `after_input` = the last input index of their batch."""
    from joins.spark import get_spark

    spark = get_spark()
    counters = dict.fromkeys(METRIC_NAMES, 0)
    last_of_batch: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="tj-stj-replay-") as tmp:
        replay = ReplayLake(spark, spec, tmp)
        for n, batch in enumerate(cut_batches(records, batch_size), start=1):
            for name, count in replay.land(batch, n).items():
                counters[name] += count
            report = replay.run()
            if report.skipped:
                continue
            assert report.batch_id is not None
            last_of_batch[report.batch_id] = batch[-1].i
            for name in ("skipped_null_value", "skipped_null_key", "inner_unmatched", "late_joined",
                         "late_dropped", "quarantined", "lookup_beyond_history_retention"):
                counters[name] += getattr(report, name)
            counters["buffered"] = report.still_buffered
        ordered = replay.ordered_rows()
    if metrics is not None:
        metrics.update(counters)
    return [{**item, "after_input": last_of_batch[batch_id]} for batch_id, *_rest, item in ordered]
