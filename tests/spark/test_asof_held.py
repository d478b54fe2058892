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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.asof import HeldTable, held_asof_join
from joins.errors import InputRecordError
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

    def held(self, spark: Any, holder: str, key_as: str, max_rows: int) -> HeldTable:
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
                         max_rows=max_rows)


def held_join(spark: Any, log: VersionsLog, holder: str, stream: list[tuple[int, int, int, int]],
              key_as: str, retention: int | None, max_rows: int = 1000) -> Any:
    sdf = spark.createDataFrame(stream, STREAM_SCHEMA)
    if key_as != "long":
        sdf = sdf.selectExpr("id", "CAST(k AS STRING) AS k", "ts", "fk")
    return held_asof_join(sdf, log.held(spark, holder, key_as, max_rows), stream_key="k",
                          stream_ts="ts", table_key="k", table_ts="ts", how="left",
                          table_value_cols=["val"], history_retention_ms=retention,
                          tombstone_col="tomb", valid_from_col="table_valid_from")


def answers(joined: Any) -> list[tuple[int, str | None, int | None]]:
    rows = joined.select("id", "val", "table_valid_from").collect()
    return sorted(((r[0], r[1], r[2]) for r in rows), key=repr)


puts_st = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 8), st.booleans(),
                             st.sampled_from(["x", "y", None])), min_size=1, max_size=4)
steps_st = st.lists(st.one_of(
    st.tuples(st.just("append"), puts_st), st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("recreate"), puts_st), st.tuples(st.just("nothing"), st.none()),
    st.tuples(st.just("skip"), puts_st)), min_size=1, max_size=5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
    log = VersionsLog()
    log.append([(1, 1, False, 1, 0, "a"), (1, 2, False, 1, 1, "b")])
    assert held_join(spark, log, uuid.uuid4().hex, [(0, 1, 5, 0)], "long", None, max_rows=1) is None
    assert log.history_reads == 0


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
