"""The version index held from one micro-batch to the next (`joins.asof.held`) against a fresh
look at the whole history.

A versions log evolves step by step (puts appended under new table versions, a put repeated at
the same (key, ts) with a later sequence, a compaction that rewrites the files, the table created
anew at the same place, steps where nothing changes or the holder skips versions); after each
step the held join must answer as seed 000's get(key, ts) over the log with each (key, ts)
resolved to its latest put (the brute-force oracle of test_asof_join), and must have read only
what it had to: the history when nothing usable was held, else only the new rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.asof import HeldJoin, HeldTable, asof_join, held_asof_join
from joins.asof.held import HELD_MAX_BYTES
from joins.errors import InputRecordError
from tests.budget import spark_examples
from tests.spark.test_asof_join import INDEX_RUNS, NO_INDEX, STREAM_SCHEMA, brute_force

pytestmark = [pytest.mark.spark, pytest.mark.skipif(not INDEX_RUNS, reason=NO_INDEX)]

LOG_SCHEMA = "k long, ts long, tomb boolean, batch_id long, arrival long, val string"
# (key, ts, tomb, batch_id, arrival, value)
Put = tuple[int, int, bool, int, int, str | None]


class VersionsLog:
    """A versioned table as the held index sees it: versions of puts, rewrites, a recreation."""

    def __init__(self) -> None:
        self.table_id = uuid.uuid4().hex
        self.puts: list[Put] = []
        self.added: dict[int, list[Put]] = {}  # version -> the puts it added
        self.rewritten: set[int] = set()       # versions that rewrote files (no changelog)
        self.version = 0
        self.history_reads = 0
        self.change_reads = 0

    def append(self, puts: list[Put]) -> None:
        self.version += 1
        self.added[self.version] = puts
        self.puts += puts

    def compact(self) -> None:
        self.version += 1
        self.rewritten.add(self.version)

    def recreate(self, puts: list[Put]) -> None:
        self.table_id = uuid.uuid4().hex
        self.puts, self.added, self.rewritten, self.version = [], {}, set(), 0
        self.append(puts)

    def latest_puts(self) -> list[tuple[int, int, str | None, bool]]:
        """(key, ts, value, tombstone) with each (key, ts) at its latest sequence."""
        last: dict[tuple[int, int], Put] = {}
        for put in sorted(self.puts, key=lambda p: (p[3], p[4])):
            last[(put[0], put[1])] = put
        return [(k, ts, val, tomb) for (k, ts), (_, _, tomb, _, _, val) in last.items()]

    def held(self, spark: Any, holder: str, key_as: str, max_rows: int,
             max_bytes: int = HELD_MAX_BYTES, first_read_max_rows: int = 1000) -> HeldTable:
        def frame(puts: Sequence[Put]) -> Any:
            df = spark.createDataFrame(list(puts), LOG_SCHEMA)
            return df if key_as == "long" else df.selectExpr("CAST(k AS STRING) AS k", *df.columns[1:])

        def history() -> Any:
            self.history_reads += 1
            return frame(self.puts)

        version = self.version

        def changes_after(after: int) -> Any:
            if any(after < v <= version for v in self.rewritten):
                return None
            self.change_reads += 1
            return frame([p for v in range(after + 1, version + 1) for p in self.added.get(v, [])])

        return HeldTable(holder=holder, table_id=self.table_id, version=version,
                         rows=len(self.puts), schema=frame([]).schema, history=history,
                         changes_after=changes_after, sequence=("batch_id", "arrival"),
                         max_rows=max_rows, max_bytes=max_bytes,
                         first_read_max_rows=first_read_max_rows)


def held_join(spark: Any, log: VersionsLog, holder: str, stream: list[tuple[int, int, int, int]],
              key_as: str, retention: int | None, max_rows: int = 1000,
              min_stream_ts: int | None = None) -> Any:
    """The held join's answers, the rows it leaves (older than a held window) answered by a
    plain as-of join of the whole log, as a caller would; None where it does not hold."""
    found = held_found(spark, log, holder, stream, key_as, retention, max_rows, min_stream_ts)
    if found is None:
        return None
    if found.rest is None:
        return found.joined
    table = spark.createDataFrame([(k, ts, tomb, val) for k, ts, val, tomb in log.latest_puts()],
                                  "k long, ts long, tomb boolean, val string")
    if key_as != "long":
        table = table.selectExpr("CAST(k AS STRING) AS k", "ts", "tomb", "val")
    return found.joined.unionByName(asof_join(found.rest, table, history_retention_ms=retention,
                                              strategy="auto", **_JOIN))


def held_found(spark: Any, log: VersionsLog, holder: str, stream: list[tuple[int, int, int, int]],
               key_as: str, retention: int | None, max_rows: int = 1000,
               min_stream_ts: int | None = None) -> HeldJoin | None:
    sdf = spark.createDataFrame(stream, STREAM_SCHEMA)
    if key_as != "long":
        sdf = sdf.selectExpr("id", "CAST(k AS STRING) AS k", "ts", "fk")
    return held_asof_join(sdf, log.held(spark, holder, key_as, max_rows),
                          history_retention_ms=retention, min_stream_ts=min_stream_ts, **_JOIN)


_JOIN: dict[str, Any] = {"stream_key": "k", "stream_ts": "ts", "table_key": "k", "table_ts": "ts",
                         "how": "left", "table_value_cols": ["val"], "tombstone_col": "tomb",
                         "valid_from_col": "table_valid_from"}


def answers(joined: Any) -> list[tuple[int, str | None, int | None]]:
    rows = joined.select("id", "val", "table_valid_from").collect()
    return sorted(((r[0], r[1], r[2]) for r in rows), key=repr)


puts_st = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 8), st.booleans(),
                             st.sampled_from(["x", "y", None])), min_size=1, max_size=4)
steps_st = st.lists(st.one_of(
    st.tuples(st.just("append"), puts_st), st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("recreate"), puts_st), st.tuples(st.just("nothing"), st.none()),
    st.tuples(st.just("skip"), puts_st)), min_size=1, max_size=5)


@spark_examples(15)
@given(first=puts_st, steps=steps_st, key_as=st.sampled_from(["long", "string"]),
       retention=st.sampled_from([None, 3]),
       lookups=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10)), min_size=1, max_size=5))
def test_held_index_answers_as_the_whole_history(spark: Any, first: list[Any], steps: list[Any],
                                                 key_as: str, retention: int | None,
                                                 lookups: list[tuple[int, int]]) -> None:
    log, holder, batch = VersionsLog(), uuid.uuid4().hex, 1

    def puts_of(raw: list[Any]) -> list[Put]:
        return [(k, ts, tomb, batch, n, val) for n, (k, ts, tomb, val) in enumerate(raw)]

    log.append(puts_of(first))
    stream = [(n, k, ts, 0) for n, (k, ts) in enumerate(lookups)]
    expect_history = True
    for kind, raw in [("first", None), *steps]:
        batch += 1
        if kind in ("append", "skip"):
            log.append(puts_of(raw))
        elif kind == "compact":
            log.compact()
            expect_history = True
        elif kind == "recreate":
            log.recreate(puts_of(raw))
            expect_history = True
        if kind == "skip":
            continue  # this holder does not read this version: the next read spans two
        reads = (log.history_reads, log.change_reads)
        got = answers(held_join(spark, log, holder, stream, key_as, retention))
        assert got == brute_force(stream, log.latest_puts(), how="left", retention=retention)
        assert (log.history_reads - reads[0] == 1) == expect_history, (kind, expect_history)
        expect_history = False


def test_a_table_too_large_to_hold_is_left_to_the_caller(spark: Any) -> None:
    log, holder = VersionsLog(), uuid.uuid4().hex
    log.append([(1, 1, False, 1, 0, "a"), (1, 2, False, 1, 1, "b")])
    # Too large to hold whole (2 > 1), and even its window (one version per key) exceeds half
    # of max_rows: the history is read once, for its statistics, and not again.
    for _ in range(2):
        assert held_join(spark, log, holder, [(0, 1, 5, 0)], "long", None, max_rows=1) is None
    assert log.history_reads == 1


def test_a_put_repeated_with_one_sequence_is_named(spark: Any) -> None:
    log = VersionsLog()
    log.append([(7, 3, False, 1, 0, "a"), (7, 3, False, 1, 0, "b")])
    with pytest.raises(InputRecordError) as info:
        held_join(spark, log, uuid.uuid4().hex, [(0, 7, 5, 0)], "long", None)
    assert "7" in str(info.value) and "ts" in str(info.value)


def test_the_least_recently_used_holder_gives_way(spark: Any) -> None:
    cache = spark._jvm.temporaljoins.IndexCache
    first, second = VersionsLog(), VersionsLog()
    first.append([(1, 1, False, 1, 0, "a"), (2, 1, False, 1, 1, "b"), (3, 1, False, 1, 2, "c")])
    second.append([(1, 2, False, 1, 0, "x"), (2, 2, False, 1, 1, "y"), (3, 2, False, 1, 2, "z")])
    holders = uuid.uuid4().hex, uuid.uuid4().hex
    old = cache.limit(5)  # room for one of the two histories
    try:
        for log, holder in zip((first, second, first), (*holders, holders[0]), strict=True):
            assert answers(held_join(spark, log, holder, [(0, 2, 5, 0)], "long", None)) \
                == brute_force([(0, 2, 5, 0)], log.latest_puts(), how="left")
        # The first holder gave way when the second took its place: it read its table again.
        assert (first.history_reads, second.history_reads) == (2, 1)
    finally:
        cache.limit(old)


def test_a_large_table_is_held_as_a_window(spark: Any) -> None:
    """20 versions of 2 keys, at most 8 held: the window from the latest ts on holds each key's
    last version before it; lookups from there are answered by it, older ones are left over."""
    log, holder = VersionsLog(), uuid.uuid4().hex
    log.append([(k, ts, False, 1, 10 * ts + k, f"{k}@{ts}") for ts in range(10) for k in (1, 2)])
    stream = [(0, 1, 9, 0), (1, 2, 12, 0), (2, 1, 3, 0), (3, 3, 9, 0)]
    found = held_found(spark, log, holder, stream, "long", None, max_rows=8)
    assert found is not None and found.window_from == 9
    assert found.held_rows == 4 < 8  # (1, 9), (2, 9) and each key's last before: (1, 8), (2, 8)
    assert sorted(r["id"] for r in found.rest.collect()) == [2]
    assert answers(found.joined) == [(0, "1@9", 9), (1, "2@9", 9), (3, None, None)]
    # Puts after the window's start (one repeating (1, 9) with a later sequence), merged in as
    # the delta layer; the caller knows no lookup is older than the start: nothing is left over.
    log.append([(1, 9, False, 2, 0, "again"), (2, 10, False, 2, 1, "new"), (2, 11, True, 2, 2, None)])
    later = [(0, 1, 9, 0), (1, 2, 10, 0), (2, 2, 12, 0)]
    again = held_found(spark, log, holder, later, "long", None, max_rows=8, min_stream_ts=9)
    assert again is not None and again.rest is None
    assert again.held_rows == 7 and log.history_reads == 1
    assert answers(again.joined) == [(0, "again", 9), (1, "new", 10), (2, None, None)]


@spark_examples(20)
@given(first=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 20), st.booleans(),
                                st.sampled_from(["x", "y", None])), min_size=6, max_size=14),
       steps=st.lists(puts_st, min_size=1, max_size=4),
       key_as=st.sampled_from(["long", "string"]), retention=st.sampled_from([None, 4]),
       max_rows=st.sampled_from([8, 12, 1000]), rebase=st.sampled_from([0, 1 << 16]),
       lookups=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 24)), min_size=1, max_size=6))
def test_layers_and_windows_answer_as_the_whole_history(
        spark: Any, first: list[Any], steps: list[Any], key_as: str, retention: int | None,
        max_rows: int, rebase: int, lookups: list[tuple[int, int]]) -> None:
    """The held index in its two layers (a delta beside the base, or merged into it at once:
    `rebase`) and as a window of a table larger than `max_rows`: with the rows it leaves over
    answered from the whole history, every answer is get(key, ts)'s over the log."""
    cache = spark._jvm.temporaljoins.IndexCache
    log, holder = VersionsLog(), uuid.uuid4().hex
    log.append([(k, ts, tomb, 1, n, val) for n, (k, ts, tomb, val) in enumerate(first)])
    stream = [(n, k, ts, 0) for n, (k, ts) in enumerate(lookups)]
    old = cache.rebaseMinRows(rebase)
    try:
        for batch, raw in enumerate([[], *steps], start=2):
            log.append([(k, ts, tomb, batch, n, val) for n, (k, ts, tomb, val) in enumerate(raw)])
            got = held_join(spark, log, holder, stream, key_as, retention, max_rows=max_rows)
            if got is None:
                assert len(log.puts) > max_rows  # not even a window fits
                continue
            assert answers(got) == brute_force(stream, log.latest_puts(), how="left",
                                               retention=retention)
    finally:
        cache.rebaseMinRows(old)


def test_a_put_repeated_in_the_delta_stays_the_latest_past_retention(spark: Any) -> None:
    """Past history retention only a key's latest version answers; a (key, ts) put again after
    the base was built lives in both layers, and the delta's put is that latest version."""
    log, holder = VersionsLog(), uuid.uuid4().hex
    log.append([(1, 5, False, 1, 0, "a"), (2, 100, False, 1, 1, "z")])
    stream = [(0, 1, 50, 0)]  # 50 < 100 - 2: past retention
    assert answers(held_join(spark, log, holder, stream, "long", 2)) == [(0, "a", 5)]
    log.append([(1, 5, False, 2, 0, "b")])
    assert answers(held_join(spark, log, holder, stream, "long", 2)) == [(0, "b", 5)]


def test_a_history_too_wide_to_keep_is_tried_as_a_window_then_left(spark: Any) -> None:
    """Rows within max_rows but values over max_bytes: this batch still uses what it read, the
    next one tries a window, and once that does not fit either the table is not read again."""
    log, holder = VersionsLog(), uuid.uuid4().hex
    log.append([(k, ts, False, 1, 10 * ts + k, "v" * 40) for ts in range(4) for k in (1, 2)])
    stream = [(0, 1, 3, 0), (1, 2, 0, 0)]
    expected = brute_force(stream, log.latest_puts(), how="left")
    reads = []
    for _ in range(3):
        sdf = spark.createDataFrame(stream, STREAM_SCHEMA)
        found = held_asof_join(sdf, log.held(spark, holder, "long", 1000, max_bytes=100), **_JOIN)
        reads.append(log.history_reads)
        if found is None:
            break
        left = [] if found.rest is None else [tuple(r) for r in found.rest.collect()]
        # The rows left over are the caller's: here answered by the oracle itself.
        assert sorted(answers(found.joined) + brute_force(left, log.latest_puts(), how="left"),
                      key=repr) == expected
        assert (found.window_from is None) == (len(reads) == 1)
    assert found is None and reads == [1, 2, 2]


def test_a_large_history_is_read_from_the_second_batch_on(spark: Any) -> None:
    """A one-off batch should not pay for reading a large history it will never use again: a
    holder's first batch in the process leaves it to the caller, the second reads it."""
    log, holder = VersionsLog(), uuid.uuid4().hex
    log.append([(1, 1, False, 1, 0, "a"), (1, 2, False, 1, 1, "b")])
    stream = [(0, 1, 5, 0)]
    found = []
    for _ in range(2):
        table = log.held(spark, holder, "long", 1000, first_read_max_rows=1)
        found.append(held_asof_join(spark.createDataFrame(stream, STREAM_SCHEMA), table, **_JOIN))
    assert found[0] is None and found[1] is not None and log.history_reads == 1
    assert answers(found[1].joined) == [(0, "b", 2)]
