"""What the Spark replays of the table-result operators share: scenario records landed as
changelog tables (`key` and `value` as canonical JSON text, `ts`, `tombstone`, `_seq` = the
record's arrival index), and their output rows read back as items.

Keys are `joins.core.keys.key_text`, so that two keys are equal strings in Spark exactly when
the reference engine takes them as one key (1 and 1.0 are two keys).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from joins import lake
from joins.changelog.values import FIELD_TYPE, JsonValues, field_column
from joins.core.fields import canonical_json
from joins.core.keys import key_text
from joins.microbatch import cut_batches
from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from joins.core.operator import Item

CHANGELOG_SCHEMA = "key string, value string, ts long, tombstone boolean, _seq long"


def value_text(value: Any) -> str | None:
    """A value as the replay stores it (None: a tombstone)."""
    return None if value is None else canonical_json(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def changelog_frame(spark: SparkSession, records: Sequence[Any],
                    values: JsonValues | None = None) -> DataFrame:
    """Records with `i`, `key`, `value`, `ts` as changelog rows; with `values`, plus one FIELD
    column per path of the value model (what an ingest with a declared schema extracts)."""
    return local_rows(spark, changelog_rows(records, values), changelog_schema(values))


def changelog_rows(records: Sequence[Any], values: JsonValues | None = None) -> list[tuple[Any, ...]]:
    """Records as rows of `changelog_schema(values)`."""
    return [(key_text(r.key), value_text(r.value), r.ts, r.value is None, r.i,
             *(() if values is None else values.land_columns(r.value))) for r in records]


def changelog_schema(values: JsonValues | None = None) -> str:
    paths = () if values is None else values.paths
    return CHANGELOG_SCHEMA + "".join(f", {field_column(n)} {FIELD_TYPE}" for n in range(len(paths)))


def land(spark: SparkSession, path: str, records: Sequence[Any], *, create: bool = False,
         values: JsonValues | None = None) -> None:
    """Append `records` to the changelog table at `path` (an empty table when `create`), as an
    upstream producer would (`joins.lake.producer`)."""
    if records or create:
        lake.append_rows(spark, path, changelog_rows(records, values), changelog_schema(values))


def read_rows(spark: SparkSession, path: str, columns: list[str] | None = None) -> list[Any]:
    """Every row of a (small) table; a replay's output is what the command prints."""
    if not lake.table_exists(path):
        return []
    return lake.read_delta(spark, path, columns=columns).collect()


class ReplayLake(Protocol):
    """A scenario's lake: its records landed as input tables, the join run one micro-batch at a
    time, the output read back as `(batch id, ..., item)` tuples in emission order."""

    def land(self, records: Sequence[Any]) -> None: ...

    def run(self) -> Any: ...

    def ordered_rows(self) -> Sequence[tuple[Any, ...]]: ...


def replay_batches(make: Callable[[str], ReplayLake], records: Sequence[Any],
                   batch_size: int | None, *, counters: Callable[[Any], Mapping[str, int]],
                   names: Sequence[str] = (), metrics: dict[str, int] | None = None,
                   prefix: str = "tj-replay-") -> list[Item]:
    """`python -m joins replay --engine spark` for an operator's `ReplayLake` (made in a temporary
    folder): `batch_size` records a micro-batch (None: one batch), each item with `after_input`,
    the last input index of its batch. `counters(result)` gives a batch's share of the
    reference's counters; their sums go to `metrics` (every one of `names`, zero or not)."""
    totals = dict.fromkeys(names, 0)
    last_of_batch: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        replay = make(tmp)
        for batch in cut_batches(records, batch_size):
            replay.land(batch)
            result = replay.run()
            assert result.batch_id is not None and not result.skipped
            last_of_batch[result.batch_id] = batch[-1].i
            for name, n in counters(result).items():
                totals[name] = totals.get(name, 0) + int(n)
        ordered = replay.ordered_rows()
    if metrics is not None:
        metrics.update(totals)
    return [{**row[-1], "after_input": last_of_batch[row[0]]} for row in ordered]


class TableReplay:
    """A one-input table operator's replay under `root`: its changelog table (`table`, landed
    with the value model's FIELD columns) and the step's root (`folder`). Operators configure
    it with their step and how an output row reads back (`row_of`)."""

    def __init__(self, spark: SparkSession, spec: Any, step: Any, values: JsonValues, root: str,
                 folder: str, *, create: bool = True) -> None:
        self.spark, self.spec, self.step, self.values = spark, spec, step, values
        self.source, self.join_root = f"{root}/table", f"{root}/{folder}"
        if create:
            land(spark, self.source, [], create=True, values=values)

    def land(self, records: Sequence[Any]) -> None:
        land(self.spark, self.source, records, values=self.values)

    def run(self, **kwargs: Any) -> Any:
        from joins import incremental

        return incremental.run_microbatch(self.spark, self.step, self.join_root,
                                          {"table": self.source}, **kwargs)

    def row_of(self, row: Any) -> tuple[Any, ...]:
        """(batch id, emit order..., item) of an output row; a forwarded change by default."""
        return (row["_batch_id"], row["_emit_seq"], forwarded_item(row))

    def ordered_rows(self) -> list[tuple[Any, ...]]:
        rows = read_rows(self.spark, f"{self.join_root}/output")
        return sorted((self.row_of(r) for r in rows), key=lambda t: t[:-1])


def forwarded_item(row: Any) -> Item:
    """A filter's or map's output row as the reference's change item."""
    return {"key": loads(row["key"]), "value": loads(row["value"]) if row["has_value"] else None,
            "old_value": loads(row["old_value"]) if row["has_old_value"] else None,
            "ts": row["ts"], "is_latest": row["is_latest"]}


def replay_table(make: Callable[[SparkSession, str], ReplayLake], records: Sequence[Any],
                 batch_size: int | None, metrics: dict[str, int] | None, *,
                 names: Sequence[str], prefix: str) -> list[Item]:
    """`spark_replay` of a table operator whose batch reports carry the reference's counters."""
    from joins.spark import get_spark

    return replay_batches(lambda tmp: make(get_spark(), tmp), records, batch_size,
                          counters=lambda r: {n: r.done.report.get(n, 0) for n in names},
                          names=names, metrics=metrics, prefix=prefix)


class TwoTableReplay:
    """A replay of a join of two changelog tables (table-table, foreign-key) under `root`: the
    `left` and `right` tables and the join's root (`join`). Operators give `create` (the empty
    tables), `land`, `microbatch` (their `run_microbatch`) and `ordered_rows`."""

    def __init__(self, spark: SparkSession, spec: Any, root: str, *, create: bool = True,
                 quarantine_expired: bool = False) -> None:
        self.spark, self.spec = spark, spec
        self.root = root.rstrip("/")
        self.join_root = f"{self.root}/join"
        self.sources = {side: f"{self.root}/{side}" for side in ("left", "right")}
        self.quarantine_expired = quarantine_expired
        if create:
            self.create()

    def create(self) -> None:
        for path in self.sources.values():
            land(self.spark, path, [], create=True)

    def microbatch(self) -> Callable[..., Any]:
        raise NotImplementedError

    def run(self, **kwargs: Any) -> Any:
        return self.microbatch()(self.spark, self.spec, self.join_root,
                                 left_source=self.sources["left"], right_source=self.sources["right"],
                                 quarantine_expired=self.quarantine_expired, **kwargs)
