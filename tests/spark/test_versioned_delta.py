"""The versioned table on Delta (issue 3 §5): batch-scale seed rules against `VersionedStore`.

The oracle is the reference store fed record by record; the Spark side decides whole
micro-batches at once (prefix-scan stream time) and answers as-of reads from an append-only
versions log.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.core.store import VersionedStore
from joins.errors import ConfigError, InputRecordError
from joins.lake import delta_version, read_delta, table_exists
from joins.versioned import ingest as spark_incremental
from joins.versioned.batches import IngestReport, IngestStateError
from joins.versioned.ingest import (
    EXPIRED,
    STATUS,
    STORED,
    classify_changelog,
    ingest_changelog,
    versions_rows,
)
from joins.versioned.spark_store import (
    ARRIVAL,
    BATCH_ID,
    TOMBSTONE,
    TS,
    VersionedDeltaLayout,
    compact,
    compaction_plan,
    lookup_as_of,
    read_lookup_as_of,
    read_snapshot,
    read_versions,
    snapshot_as_of,
)
from joins.versioned.stream_time import STREAM_TIME
from tests.budget import examples

pytestmark = pytest.mark.spark

CHANGELOG_SCHEMA = "k1 string, k2 int, v long, ts long, tombstone boolean, arrival long"
KEYS = [("a", 1), ("a", 2), ("b", 1)]


def layout(retention: int) -> VersionedDeltaLayout:
    return VersionedDeltaLayout(key_columns=("k1", "k2"), value_columns=("v",),
                                history_retention_ms=retention)


@dataclass(frozen=True)
class Put:
    key: tuple[str, int]
    value: int | None  # None: tombstone
    ts: int


puts = st.builds(Put, key=st.sampled_from(KEYS),
                 value=st.one_of(st.none(), st.integers(0, 9)), ts=st.integers(0, 20))


@st.composite
def changelogs(draw: st.DrawFn) -> tuple[int, list[list[Put]], int]:
    """(history retention, micro-batches in arrival order, prefix-scan block size)."""
    records = draw(st.lists(puts, min_size=1, max_size=14))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(records) - 1)), max_size=3))))
    bounds = [0, *[c for c in cuts if c < len(records)], len(records)]
    batches = [records[a:b] for a, b in itertools.pairwise(bounds)]
    return draw(st.integers(0, 6)), batches, draw(st.sampled_from([1, 2, 3, 1 << 20]))


def batch_frame(spark: Any, batch: list[Put], first_arrival: int) -> Any:
    rows = [(p.key[0], p.key[1], p.value, p.ts, p.value is None, first_arrival + i)
            for i, p in enumerate(batch)]
    return spark.createDataFrame(rows, CHANGELOG_SCHEMA)


def oracle(retention: int, batches: list[list[Put]]) -> tuple[VersionedStore, list[str]]:
    store = VersionedStore(retention)
    outcomes = [store.put(p.key, None if p.value is None else {"v": p.value}, p.ts).outcome
                for batch in batches for p in batch]
    return store, ["expired" if o == "expired" else "stored" for o in outcomes]


def store_get(store: VersionedStore, key: tuple[str, int], as_of: int) -> tuple[Any, ...] | None:
    found = store.get(key, as_of)
    return None if found is None else (found.value["v"], found.valid_from, found.valid_to)


def snapshot_dict(df: Any) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {(r["k1"], r["k2"]): (r["v"], r["valid_from"], r["valid_to"]) for r in df.collect()}


AS_OF_GRID = range(-1, 23)


def grid_from_store(store: VersionedStore) -> dict[tuple[str, int, int], tuple[Any, ...]]:
    out: dict[tuple[str, int, int], tuple[Any, ...]] = {}
    for key in KEYS:
        for as_of in AS_OF_GRID:
            found = store.get(key, as_of)
            out[(*key, as_of)] = (None, None) if found is None else (found.value["v"], found.valid_from)
    return out


def grid_lookup(spark: Any, versions: Any, lay: VersionedDeltaLayout,
                stream_time: int | None) -> dict[tuple[str, int, int], tuple[Any, ...]]:
    """lookup_as_of of every (key, as_of) of the grid, in one query."""
    pairs = spark.createDataFrame([(k1, k2, t) for k1, k2 in KEYS for t in AS_OF_GRID],
                                  "k1 string, k2 int, as_of long")
    rows = lookup_as_of(pairs, versions, lay, stream_time=stream_time).collect()
    assert len(rows) == len(KEYS) * len(AS_OF_GRID)  # left join: one row per pair
    return {(r["k1"], r["k2"], r["as_of"]): (r["v"], r["valid_from"]) for r in rows}


# ---- pure DataFrame level (no Delta) --------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=examples(10))
@given(case=changelogs(), as_ofs=st.lists(st.integers(-1, 22), min_size=1, max_size=3),
       bounded=st.booleans())
def test_batch_decisions_and_snapshots_equal_the_store(spark: Any, case: Any, as_ofs: list[int],
                                                       bounded: bool) -> None:
    retention, batches, block_rows = case
    lay = layout(retention)
    store, expected = oracle(retention, batches)

    stream_time: int | None = None
    decided: list[str] = []
    stored_frames = []
    arrival = 0
    for batch_id, batch in enumerate(batches):
        # bounded: the caller tells the batch's size (one block without a job when it fits).
        classified = classify_changelog(batch_frame(spark, batch, arrival), lay,
                                        stream_time_before=stream_time, block_rows=block_rows,
                                        rows_at_most=len(batch) if bounded else None)
        rows = sorted(classified.select(ARRIVAL, STATUS, TS).collect(), key=lambda r: r[ARRIVAL])
        decided += [r[STATUS] for r in rows]
        stored_ts = [r[TS] for r in rows if r[STATUS] == STORED]
        if stored_ts:
            stream_time = max(stored_ts) if stream_time is None else max(stream_time, *stored_ts)
        stored_frames.append(versions_rows(classified, lay, source_id="s", batch_id=batch_id))
        arrival += len(batch)
    assert decided == expected
    assert stream_time == store.stream_time

    versions = stored_frames[0]
    for frame in stored_frames[1:]:
        versions = versions.unionByName(frame)
    versions = spark.createDataFrame(versions.collect(), versions.schema)
    compacted = spark.createDataFrame(compaction_plan(versions, lay, stream_time).collect(),
                                      versions.schema)
    for as_of in as_ofs:
        want = {key: got for key in KEYS if (got := store_get(store, key, as_of)) is not None}
        assert snapshot_dict(snapshot_as_of(versions, lay, as_of, stream_time)) == want
        # Compaction never changes an answer (here: for every as_of, not only >= the bound).
        assert snapshot_dict(snapshot_as_of(compacted, lay, as_of, stream_time)) == want
    want_grid = grid_from_store(store)
    assert grid_lookup(spark, versions, lay, stream_time) == want_grid
    assert grid_lookup(spark, compacted, lay, stream_time) == want_grid


def test_stream_time_carries_across_blocks_in_arrival_order(spark: Any) -> None:
    # Arrival order differs from row order and blocks of 2 force the carry between blocks:
    # ts 10 arrives first, so ts 3 (arrival 3, block 1) is expired under retention 5.
    rows = [("a", 1, 1, 3, False, 3), ("a", 1, 2, 10, False, 0), ("b", 1, 3, 5, False, 2),
            ("b", 1, 4, 4, False, 1), ("a", 2, 5, 9, False, 4)]
    classified = classify_changelog(spark.createDataFrame(rows, CHANGELOG_SCHEMA), layout(5),
                                    stream_time_before=None, block_rows=2)
    got = {r[ARRIVAL]: (r[STREAM_TIME], r[STATUS]) for r in classified.collect()}
    assert got == {0: (None, STORED), 1: (10, EXPIRED), 2: (10, STORED), 3: (10, EXPIRED),
                   4: (10, STORED)}


def test_put_exactly_at_the_bound_is_stored_below_is_expired(spark: Any) -> None:
    rows = [("a", 1, 1, 10, False, 0), ("a", 1, 2, 7, False, 1), ("a", 1, 3, 6, False, 2)]
    classified = classify_changelog(spark.createDataFrame(rows, CHANGELOG_SCHEMA), layout(3),
                                    stream_time_before=None)
    got = {r[ARRIVAL]: r[STATUS] for r in classified.collect()}
    assert got == {0: STORED, 1: STORED, 2: EXPIRED}


@pytest.mark.parametrize("rows_at_most", [None, 2], ids=["span_read", "size_told"])
def test_stream_time_from_earlier_batches_expires_records(spark: Any, rows_at_most: int | None) -> None:
    rows = [("a", 1, 1, 4, False, 0), ("a", 1, 2, 5, False, 1)]
    classified = classify_changelog(spark.createDataFrame(rows, CHANGELOG_SCHEMA), layout(0),
                                    stream_time_before=5, rows_at_most=rows_at_most)
    assert {r[ARRIVAL]: r[STATUS] for r in classified.collect()} == {0: EXPIRED, 1: STORED}


def test_equal_ts_later_arrival_wins_value_to_tombstone_and_back(spark: Any) -> None:
    lay = layout(100)
    rows = [("a", 1, 1, 5, False, 0), ("a", 1, None, 5, True, 1), ("b", 1, 7, 5, True, 2),
            ("b", 1, 8, 5, False, 3)]
    classified = classify_changelog(spark.createDataFrame(rows, CHANGELOG_SCHEMA), lay,
                                    stream_time_before=None)
    versions = versions_rows(classified, lay, source_id="s", batch_id=0)
    # The tombstone's carried value is dropped: a tombstone has no value.
    assert snapshot_dict(snapshot_as_of(versions, lay, 5, 5)) == {("b", 1): (8, 5, None)}


def test_layout_refuses_reserved_and_duplicate_names() -> None:
    with pytest.raises(ConfigError, match=r"key_columns.*'ts'.*reserved"):
        VersionedDeltaLayout.parse({"key_columns": ["ts"], "history_retention_ms": 1})
    with pytest.raises(ConfigError, match=r"'k'.*twice"):
        VersionedDeltaLayout.parse({"key_columns": ["k"], "value_columns": ["k"],
                                    "history_retention_ms": 1})
    with pytest.raises(ConfigError, match=r"config\.history_retention_ms"):
        VersionedDeltaLayout.parse({"key_columns": ["k"], "history_retention_ms": -1})


def test_versions_rows_partition_by_event_date(spark: Any) -> None:
    lay = layout(0)
    day = 86_400_000
    rows = [("a", 1, 1, day + 5, False, 0)]
    classified = classify_changelog(spark.createDataFrame(rows, CHANGELOG_SCHEMA), lay,
                                    stream_time_before=None)
    row = versions_rows(classified, lay, source_id="src", batch_id=7).first()
    assert str(row["event_date"]) == "1970-01-02"
    assert (row[BATCH_ID], row[TOMBSTONE], row["source_id"]) == (7, False, "src")



# ---- on Delta: ingest, idempotence, crash recovery, compaction --------------------------------


@dataclass(frozen=True)
class Tables:
    versions: str
    quarantine: str

    @classmethod
    def under(cls, root: Path) -> Tables:
        return cls(str(root / "versions"), str(root / "quarantine"))


def ingest(spark: Any, tables: Tables, lay: VersionedDeltaLayout, batch: list[Put], batch_id: int,
           first_arrival: int, block_rows: int = 1 << 20) -> IngestReport:
    return ingest_changelog(spark, batch_frame(spark, batch, first_arrival), lay,
                            versions_path=tables.versions, quarantine_path=tables.quarantine,
                            source_id="orders", batch_id=batch_id, block_rows=block_rows)


def delta_grid(spark: Any, tables: Tables, lay: VersionedDeltaLayout) -> dict[tuple[str, int, int], Any]:
    pairs = spark.createDataFrame([(k1, k2, t) for k1, k2 in KEYS for t in AS_OF_GRID],
                                  "k1 string, k2 int, as_of long")
    rows = read_lookup_as_of(spark, tables.versions, lay, pairs).collect()
    return {(r["k1"], r["k2"], r["as_of"]): (r["v"], r["valid_from"]) for r in rows}


def quarantined_arrivals(spark: Any, tables: Tables) -> list[int]:
    if not table_exists(tables.quarantine):
        return []
    return sorted(r[ARRIVAL] for r in read_delta(spark, tables.quarantine).collect())


@pytest.mark.slow
@settings(max_examples=examples(8))
@given(case=changelogs())
def test_delta_ingest_equals_the_store_record_by_record(spark: Any, tmp_path_factory: Any,
                                                       case: Any) -> None:
    retention, batches, block_rows = case
    lay = layout(retention)
    tables = Tables.under(tmp_path_factory.mktemp("vt"))
    store, expected = oracle(retention, batches)

    arrival = 0
    for batch_id, batch in enumerate(batches):
        report = ingest(spark, tables, lay, batch, batch_id, arrival, block_rows)
        assert report.rows_in == len(batch) == report.stored + report.expired + report.quarantined
        arrival += len(batch)
    assert report.stream_time_after == store.stream_time

    stored = sorted(r[ARRIVAL] for r in read_versions(spark, tables.versions).collect())
    assert stored == [i for i, o in enumerate(expected) if o == "stored"]
    assert quarantined_arrivals(spark, tables) == [i for i, o in enumerate(expected) if o == "expired"]

    want = grid_from_store(store)
    assert delta_grid(spark, tables, lay) == want
    compact(spark, tables.versions, lay)
    assert delta_grid(spark, tables, lay) == want


BATCH_0 = [Put(("a", 1), 1, 10), Put(("b", 1), 2, 8), Put(("a", 1), 3, 2)]      # ts 2 expires
BATCH_1 = [Put(("a", 1), 4, 12), Put(("b", 1), None, 1), Put(("a", 2), 5, 9)]  # ts 1 expires


def test_rerun_of_a_committed_batch_writes_nothing(spark: Any, tmp_path: Path) -> None:
    lay, tables = layout(5), Tables.under(tmp_path)
    first = ingest(spark, tables, lay, BATCH_0, 0, 0)
    second = ingest(spark, tables, lay, BATCH_1, 1, 3)
    versions_at, quarantine_at = delta_version(tables.versions), delta_version(tables.quarantine)
    for report, batch, batch_id, arrival in ((first, BATCH_0, 0, 0), (second, BATCH_1, 1, 3)):
        again = ingest(spark, tables, lay, batch, batch_id, arrival)
        assert again.skipped and again.versions_commit is None and again.quarantine_commit is None
        assert (again.stored, again.expired, again.rows_in) == (report.stored, report.expired,
                                                                 report.rows_in)
    assert (delta_version(tables.versions), delta_version(tables.quarantine)) == (versions_at,
                                                                                 quarantine_at)
    assert (first.stored, first.expired, second.stored, second.expired) == (2, 1, 2, 1)
    assert len(read_versions(spark, tables.versions).collect()) == 4
    assert quarantined_arrivals(spark, tables) == [2, 4]


def test_crash_between_the_two_commits_then_rerun(spark: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    lay, tables = layout(5), Tables.under(tmp_path)
    ingest(spark, tables, lay, BATCH_0, 0, 0)
    versions_at = delta_version(tables.versions)

    def crash(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("driver lost after the quarantine commit")

    with monkeypatch.context() as patch:
        patch.setattr(spark_incremental, "_commit_versions", crash)
        with pytest.raises(RuntimeError, match="driver lost"):
            ingest(spark, tables, lay, BATCH_1, 1, 3)
    assert delta_version(tables.versions) == versions_at
    assert quarantined_arrivals(spark, tables) == [2, 4]  # batch 1's quarantine landed

    # The next batch may not jump over the half-committed one.
    with pytest.raises(IngestStateError, match=r"batch 1 .*half committed.*re-run batch 1"):
        ingest(spark, tables, lay, [Put(("a", 1), 6, 13)], 2, 6)

    rerun = ingest(spark, tables, lay, BATCH_1, 1, 3)
    assert not rerun.skipped and rerun.quarantine_commit is not None
    assert rerun.quarantine_commit.skipped and not rerun.versions_commit.skipped
    # Decided exactly as the interrupted run: stream time from the versions table only.
    assert (rerun.stream_time_before, rerun.stored, rerun.expired) == (10, 2, 1)
    assert quarantined_arrivals(spark, tables) == [2, 4]  # no duplicate
    assert sorted(r[ARRIVAL] for r in read_versions(spark, tables.versions).collect()) == [0, 1, 3, 5]
    assert ingest(spark, tables, lay, BATCH_1, 1, 3).skipped


def test_compaction_keeps_every_answer_and_drops_unreachable_history(spark: Any,
                                                                     tmp_path: Path) -> None:
    lay, tables = layout(3), Tables.under(tmp_path)
    batches = [
        [Put(("a", 1), 1, 1), Put(("a", 1), 2, 3), Put(("b", 1), 1, 2), Put(("a", 2), None, 2)],
        [Put(("a", 1), 3, 3), Put(("a", 1), 4, 6), Put(("b", 1), 2, 4)],  # 3 replaces (a,1)@3
        [Put(("a", 1), 5, 9), Put(("a", 1), 6, 20), Put(("b", 1), 3, 18)],
    ]
    store, _ = oracle(3, batches)
    arrival = 0
    for batch_id, batch in enumerate(batches):
        ingest(spark, tables, lay, batch, batch_id, arrival)
        arrival += len(batch)
    before = delta_grid(spark, tables, lay)
    assert before == grid_from_store(store)
    old_version = delta_version(tables.versions)

    report = compact(spark, tables.versions, lay)
    assert report.commit is not None and report.stream_time == 20
    # Bound 17: key (a,1) keeps ts 9 (answers as_of 17..19) and 20; (b,1) keeps 4 and 18;
    # (a,2) keeps its only (tombstone) version. Superseded (a,1)@3 and unreachable history go.
    kept = sorted((r["k1"], r["k2"], r[TS]) for r in read_versions(spark, tables.versions).collect())
    assert kept == [("a", 1, 9), ("a", 1, 20), ("a", 2, 2), ("b", 1, 4), ("b", 1, 18)]
    assert (report.rows_before, report.rows_after) == (10, 5)
    assert delta_grid(spark, tables, lay) == before
    assert read_snapshot(spark, tables.versions, lay, 19).count() == 2
    # The pre-compaction table is still there for time travel.
    assert read_versions(spark, tables.versions, version=old_version).count() == 10
    # Compaction is idempotent: nothing more to remove.
    assert compact(spark, tables.versions, lay).commit is None


@pytest.mark.parametrize(("rows", "pattern"), [
    ([("a", 1, 1, 5, False, 0), (None, 1, 1, 6, False, 1)], r"record 1, field 'k1': must not be null"),
    ([("a", 1, 1, 5, False, 0), ("a", 1, 1, None, False, 1)], r"record 1, field 'ts'"),
    ([("a", 1, 1, 5, False, 0), ("b", 1, 1, 6, False, None)], r"field 'arrival': must not be null"),
    ([("a", 1, 1, 5, False, 3), ("b", 1, 1, 6, False, 3)],
     r"record 3, field 'arrival': arrival index appears more than once"),
], ids=["null_key", "null_ts", "null_arrival", "duplicate_arrival"])
@pytest.mark.parametrize(("block_rows", "rows_at_most"), [(1, None), (1 << 20, 2)],
                         ids=["blocks", "one_block_told"])
def test_invalid_changelog_refuses_the_batch_before_writing(spark: Any, tmp_path: Path,
                                                            rows: list[Any], pattern: str,
                                                            block_rows: int,
                                                            rows_at_most: int | None) -> None:
    lay, tables = layout(5), Tables.under(tmp_path)
    with pytest.raises(InputRecordError, match=pattern):
        ingest_changelog(spark, spark.createDataFrame(rows, CHANGELOG_SCHEMA), lay,
                         versions_path=tables.versions, quarantine_path=tables.quarantine,
                         source_id="orders", batch_id=0, block_rows=block_rows,
                         rows_at_most=rows_at_most)
    assert not table_exists(tables.versions) and not table_exists(tables.quarantine)


def test_empty_and_all_expired_batches_still_commit(spark: Any, tmp_path: Path) -> None:
    lay, tables = layout(0), Tables.under(tmp_path)
    empty = ingest(spark, tables, lay, [], 0, 0)
    assert (empty.rows_in, empty.stream_time_after, empty.versions_version) == (0, None, 0)
    ingest(spark, tables, lay, [Put(("a", 1), 1, 10)], 1, 0)
    late = ingest(spark, tables, lay, [Put(("a", 1), 2, 9)], 2, 1)
    # Nothing stored, yet the batch is marked done: a re-run is skipped.
    assert (late.stored, late.expired, late.versions_commit.rows) == (0, 1, 0)
    assert ingest(spark, tables, lay, [Put(("a", 1), 2, 9)], 2, 1).skipped
