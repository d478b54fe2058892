"""The Spark batch as-of join (issue 4 §1) against seed 000's get(key, stream ts).

Two oracles: a brute-force scan over every table row (independent of any store code), and, where
the table's stream time is its own max ts, the reference `VersionedStore` fed the table in ts
order. Hand-written cases pin the edges (equal ts, before the first version, tombstones, the
history-retention rule with its latest-never-expires exception, null keys, left vs inner,
table_key_from); a hypothesis property compares random data including a hot key; a skew test
forces tiny buckets so that a hot key is split over many (key, bucket) groups.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame

from joins.asof import (
    asof_join,
    bucket_stats,
    input_errors,
    input_record_error,
    versions_by_bucket,
)
from joins.core.store import VersionedStore
from joins.errors import ConfigError, InputRecordError
from joins.spark import jvm
from tests.budget import examples

pytestmark = pytest.mark.spark

STREAM_SCHEMA = "id long, k long, ts long, fk long"
TABLE_SCHEMA = "k long, ts long, val string, tomb boolean"

# (id, key, ts, fk) and (key, ts, value, tombstone)
StreamRow = tuple[int, int | None, int, int | None]
TableRow = tuple[int, int, str | None, bool]


@dataclass(frozen=True)
class Answer:
    val: str | None
    valid_from: int | None


def brute_force(stream: Sequence[StreamRow], table: Sequence[TableRow], *, how: str,
                retention: int | None = None, stream_time: int | None = None,
                use_fk: bool = False) -> list[tuple[int, str | None, int | None]]:
    """Seed 000's get(key, ts) by scanning every table row: (stream id, value, valid_from)."""
    if stream_time is None and table:
        stream_time = max(ts for _, ts, _, _ in table)
    bound = None if retention is None or stream_time is None else stream_time - retention
    out = []
    for sid, key, ts, fk in stream:
        lookup = fk if use_fk else key
        versions = sorted((t, v, tomb) for k, t, v, tomb in table if k == lookup and lookup is not None)
        answer: tuple[int, str | None, bool] | None = None
        if versions:
            if bound is not None and ts < bound:
                latest = versions[-1]
                answer = latest if latest[0] <= ts else None
            else:
                older = [v for v in versions if v[0] <= ts]
                answer = older[-1] if older else None
        if answer is not None and not answer[2]:
            out.append((sid, answer[1], answer[0]))
        elif how == "left":
            out.append((sid, None, None))
    return sorted(out, key=repr)


def store_oracle(stream: Sequence[StreamRow], table: Sequence[TableRow], *, how: str,
                 retention: int | None) -> list[tuple[int, str | None, int | None]]:
    """The same lookups through the reference VersionedStore (puts in ts order never expire)."""
    # Unbounded history: longer than any two longs are apart.
    store = VersionedStore(retention if retention is not None else 2**65)
    for key, ts, val, tomb in sorted(table, key=lambda r: r[1]):
        store.put(key, None if tomb else val, ts)
    out = []
    for sid, key, ts, _ in stream:
        rec = store.get(key, ts) if key is not None else None
        if rec is not None:
            out.append((sid, rec.value, rec.valid_from))
        elif how == "left":
            out.append((sid, None, None))
    return sorted(out, key=repr)


KEY_AS = {
    "long": "{c}",
    "string": "CAST({c} AS STRING)",
    # A composite key, as the versioned table's lookups pass one.
    "struct": "CASE WHEN {c} IS NULL THEN NULL ELSE named_struct('n', {c}, 's', CAST({c} % 3 AS STRING)) END",
}


def frames(spark: Any, stream: Sequence[StreamRow], table: Sequence[TableRow], key_as: str = "long"
           ) -> tuple[DataFrame, DataFrame]:
    sdf = spark.createDataFrame(list(stream), STREAM_SCHEMA)
    tdf = spark.createDataFrame(list(table), TABLE_SCHEMA)
    if key_as != "long":
        as_key = KEY_AS[key_as]
        sdf = sdf.selectExpr("id", f"{as_key.format(c='k')} AS k", "ts", f"{as_key.format(c='fk')} AS fk")
        tdf = tdf.selectExpr(f"{as_key.format(c='k')} AS k", "ts", "val", "tomb")
    return sdf, tdf


def run(spark: Any, stream: Sequence[StreamRow], table: Sequence[TableRow], key_as: str = "long",
        **kwargs: Any) -> list[tuple[int, str | None, int | None]]:
    sdf, tdf = frames(spark, stream, table, key_as)
    kwargs.setdefault("tombstone_col", "tomb")
    result = asof_join(sdf, tdf, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts", **kwargs)
    assert result.columns == ["id", "k", "ts", "fk", "val", "table_valid_from"]
    rows = result.select("id", "val", "table_valid_from").collect()
    return sorted(((r[0], r[1], r[2]) for r in rows), key=repr)


# The JVM index needs a JDK to compile its helper; off CI a machine without one skips it visibly
# (under CI it must run, so a missing JDK fails there instead of hiding the index's tests).
# A Spark Connect run (tests/cluster) has no JVM in the process: there the index is refused with
# a clear error instead (tests/cluster/session_checks.py).
CONNECT = bool(os.environ.get("TJ_SPARK_REMOTE"))
INDEX_RUNS = not CONNECT and (jvm.jar_path() is not None or bool(os.environ.get("CI")))
NO_INDEX = ("the JVM index needs a classic session and this run is Spark Connect" if CONNECT
            else f"JVM helper unavailable: {jvm.unavailable_reason()}")
RUNNABLE = (["index", "index_shuffle", "broadcast", "shuffle"] if INDEX_RUNS
            else ["broadcast", "shuffle"])
STRATEGIES = [*(pytest.param(s, marks=pytest.mark.skipif(not INDEX_RUNS, reason=NO_INDEX))
                for s in ("index", "index_shuffle")),
              "broadcast", "shuffle"]

TABLE: list[TableRow] = [
    (1, 10, "a10", False),
    (1, 20, "a20", False),
    (1, 30, None, True),   # tombstone
    (1, 40, "a40", False),
    (2, 5, "b5", False),
    (2, 50, "b50", False),
]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_equal_ts_before_first_and_tombstone(spark: Any, strategy: str) -> None:
    stream: list[StreamRow] = [
        (0, 1, 9, None),    # before the first version: nothing
        (1, 1, 10, None),   # equal ts counts
        (2, 1, 19, None),
        (3, 1, 20, None),
        (4, 1, 35, None),   # inside the tombstone's validity: null
        (5, 1, 40, None),
        (6, 1, 10**6, None),  # far after the last version: the latest answers
        (7, 2, 49, None),
        (8, 3, 20, None),   # unknown key
        (9, None, 20, None),  # null key joins nothing
    ]
    got = run(spark, stream, TABLE, how="left", strategy=strategy)
    assert got == sorted([(0, None, None), (1, "a10", 10), (2, "a10", 10), (3, "a20", 20),
                          (4, None, None), (5, "a40", 40), (6, "a40", 40), (7, "b5", 5),
                          (8, None, None), (9, None, None)], key=repr)
    inner = run(spark, stream, TABLE, how="inner", strategy=strategy)
    assert inner == [row for row in got if row[1] is not None]
    assert inner == brute_force(stream, TABLE, how="inner")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_history_retention_latest_never_expires(spark: Any, strategy: str) -> None:
    # Table stream time 50, retention 15: bound 35. Older lookups see only the key's latest.
    stream: list[StreamRow] = [
        (0, 1, 34, None),   # < bound, key 1's latest (40) is after 34: null (history expired)
        (1, 1, 35, None),   # == bound: not expired, reads the tombstone (30): null
        (2, 1, 45, None),   # a40
        (3, 2, 10, None),   # < bound, key 2's latest (50) after 10: null, though b5 was valid
        (4, 2, 60, None),   # b50
    ]
    got = run(spark, stream, TABLE, how="left", history_retention_ms=15, strategy=strategy)
    assert got == sorted([(0, None, None), (1, None, None), (2, "a40", 40), (3, None, None),
                          (4, "b50", 50)], key=repr)
    # The latest version never expires: with a single version per key an old lookup still finds it.
    table: list[TableRow] = [(1, 10, "only", False), (2, 100, "late", False)]
    got = run(spark, [(0, 1, 20, None), (1, 1, 5, None)], table, how="inner", history_retention_ms=1,
              strategy=strategy)
    assert got == [(0, "only", 10)]
    # An explicit table stream time moves the bound (here to 1000 - 10 = 990).
    got = run(spark, [(0, 2, 10, None), (1, 2, 995, None)], TABLE, how="left",
              history_retention_ms=10, table_stream_time=1000, strategy=strategy)
    assert got == sorted([(0, None, None), (1, "b50", 50)], key=repr)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_table_key_from_and_null_keys(spark: Any, strategy: str) -> None:
    stream: list[StreamRow] = [
        (0, 99, 12, 1),     # looks up key 1 through fk, not its own key 99
        (1, 1, 12, None),   # null fk: joins nothing, left keeps it
        (2, 1, 60, 2),
    ]
    got = run(spark, stream, TABLE, how="left", table_key_from="fk", strategy=strategy)
    assert got == sorted([(0, "a10", 10), (1, None, None), (2, "b50", 50)], key=repr)
    assert run(spark, stream, TABLE, how="inner", table_key_from="fk", strategy=strategy) == [
        (0, "a10", 10), (2, "b50", 50)]


def test_output_columns_and_value_selection(spark: Any) -> None:
    sdf = spark.createDataFrame([(0, 1, 25, None)], STREAM_SCHEMA)
    tdf = spark.createDataFrame(TABLE, TABLE_SCHEMA)
    out = asof_join(sdf, tdf, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts",
                    table_value_cols=["val"], valid_from_col=None)
    assert out.columns == ["id", "k", "ts", "fk", "val"]
    assert [tuple(r) for r in out.collect()] == [(0, 1, 25, None, "a20")]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_timestamp_columns(spark: Any, strategy: str) -> None:
    sdf = spark.sql("SELECT 1 AS k, TIMESTAMP'2024-01-01 00:00:05' AS at")
    tdf = spark.sql("SELECT 1 AS k, TIMESTAMP'2024-01-01 00:00:05' AS t, 'x' AS v UNION ALL "
                    "SELECT 1, TIMESTAMP'2024-01-01 00:00:06', 'y'")
    out = asof_join(sdf, tdf, stream_key="k", stream_ts="at", table_key="k", table_ts="t",
                    strategy=strategy)  # type: ignore[arg-type]
    rows = out.collect()
    assert [(r["v"], str(r["table_valid_from"])) for r in rows] == [("x", "2024-01-01 00:00:05")]


def test_bad_config_names_the_key(spark: Any) -> None:
    sdf = spark.createDataFrame([(0, 1, 25, None)], STREAM_SCHEMA)
    tdf = spark.createDataFrame(TABLE, TABLE_SCHEMA)
    base = {"stream_key": "k", "stream_ts": "ts", "table_key": "k", "table_ts": "ts"}
    with pytest.raises(ConfigError, match="how"):
        asof_join(sdf, tdf, **base, how="outer")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="table_key_from"):
        asof_join(sdf, tdf, **base, table_key_from="nope")
    with pytest.raises(ConfigError, match="history_retention_ms"):
        asof_join(sdf, tdf, **base, history_retention_ms=-1)
    with pytest.raises(ConfigError, match="table_value_cols"):
        # 'k' is a stream column too: the output would hold it twice.
        asof_join(sdf, tdf, **{**base, "table_key": "val"}, table_value_cols=["k"])
    with pytest.raises(ConfigError, match="tombstone_col"):
        asof_join(sdf, tdf, **base, tombstone_col="val")


# The key 1 as each key type prints in an error (CAST ... AS STRING) and in its record.
KEY_TEXT = {"long": ("1", 1), "string": ("1", "1"), "struct": ("{1, 1}", "{1, 1}")}


def _collect_failure(spark: Any, stream: Any, table: Any, strategy: str, **kwargs: Any) -> InputRecordError:
    """The error of running the join: the index finds a bad table record while indexing (in
    asof_join), everything else fails in the action, which input_errors() translates."""
    with pytest.raises(InputRecordError) as failure, input_errors():
        asof_join(stream, table, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts",
                  strategy=strategy, **kwargs).collect()
    return failure.value


@pytest.mark.parametrize("key_as", ["long", "string", "struct"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_duplicate_version_fails_naming_the_record(spark: Any, strategy: str, key_as: str) -> None:
    """Fails instead of doubling output rows, as InputRecordError naming key and ts under every
    strategy and key type (a hashed key by the key itself, not its 64-bit hash)."""
    sdf, tdf = frames(spark, [(0, 1, 25, None)], [(1, 10, "a", False), (1, 10, "b", False)], key_as)
    error = _collect_failure(spark, sdf, tdf, strategy)
    text, value = KEY_TEXT[key_as]
    assert error.field == "ts" and error.record == {"k": value, "ts": 10}
    assert f"two versions with the same (k, ts) = ({text}, 10)" in str(error)
    assert str(error).startswith("asof_join table, field 'ts': ")


@pytest.mark.parametrize("key_as", ["long", "string"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_null_ts_fails_naming_the_record(spark: Any, strategy: str, key_as: str) -> None:
    sdf, tdf = frames(spark, [(0, 1, None, None)], TABLE, key_as)
    error = _collect_failure(spark, sdf, tdf, strategy, how="left")
    text, value = KEY_TEXT[key_as]
    assert error.source == "asof_join stream" and error.field == "ts"
    assert error.record == {"k": value, "ts": None}
    assert f"stream record with null field 'ts' (stream_ts), k = {text}" in str(error)
    sdf, tdf = frames(spark, [(0, 1, 5, None)], [(1, None, "a", False)], key_as)  # type: ignore[list-item]
    error = _collect_failure(spark, sdf, tdf, strategy)
    assert error.source == "asof_join table" and error.record == {"k": value, "ts": None}
    assert f"table record with null field 'ts' (table_ts), k = {text}" in str(error)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_record_errors_with_odd_names_and_timestamps(spark: Any, strategy: str) -> None:
    """Column names that look like the message templates' placeholders or need quoting, and
    timestamps (named as they print in the session time zone, alike in the JVM and in SQL)."""
    sdf = spark.sql("SELECT 'x' AS `k{ts}`, TIMESTAMP'2024-01-01 00:00:05' AS `a't`")
    tdf = spark.sql("SELECT 'x' AS `k{key}`, TIMESTAMP'2024-01-01 00:00:05' AS `t{ts_hex}`, 1 AS v "
                    "UNION ALL SELECT 'x', TIMESTAMP'2024-01-01 00:00:05', 2")
    with pytest.raises(InputRecordError) as failure, input_errors():
        asof_join(sdf, tdf, stream_key="k{ts}", stream_ts="a't", table_key="k{key}",
                  table_ts="t{ts_hex}", strategy=strategy).collect()  # type: ignore[arg-type]
    assert failure.value.record == {"k{key}": "x", "t{ts_hex}": "2024-01-01 00:00:05"}
    assert "(k{key}, t{ts_hex}) = (x, 2024-01-01 00:00:05)" in str(failure.value)
    null_stream = sdf.selectExpr("`k{ts}`", "CAST(NULL AS TIMESTAMP) AS `a't`")
    with pytest.raises(InputRecordError, match=r"null field \"a't\" \(stream_ts\), k\{ts\} = x"), \
            input_errors():
        asof_join(null_stream, tdf.limit(1), stream_key="k{ts}", stream_ts="a't", table_key="k{key}",
                  table_ts="t{ts_hex}", strategy=strategy).collect()  # type: ignore[arg-type]


def test_input_errors_leaves_other_failures_alone(spark: Any) -> None:
    with pytest.raises(ArithmeticError), input_errors():
        raise ZeroDivisionError
    assert input_record_error(ValueError("no marker here")) is None


def _root(df: Any) -> str:
    return str(df._jdf.queryExecution().analyzed().getClass().getSimpleName())


@pytest.mark.skipif(not INDEX_RUNS, reason=NO_INDEX)
def test_auto_picks_the_index_for_integer_keys_and_sql_otherwise(spark: Any, tmp_path: Any) -> None:
    sdf = spark.createDataFrame([(0, 1, 25, None)], STREAM_SCHEMA)
    # Read back from Parquet: Spark knows its size (it cannot tell for a local collection).
    spark.createDataFrame(TABLE, TABLE_SCHEMA).write.parquet(str(tmp_path / "t"))
    tdf = spark.read.parquet(str(tmp_path / "t"))
    out = asof_join(sdf, tdf, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts")
    assert _root(out) == "LogicalRDD"  # the JVM index's output
    # String keys are hashed into the index; the hidden columns that takes do not show.
    s2 = sdf.selectExpr("id", "CAST(k AS STRING) AS k", "ts")
    t2 = tdf.selectExpr("CAST(k AS STRING) AS k", "ts", "val")
    out = asof_join(s2, t2, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts")
    assert out.columns == ["id", "k", "ts", "val", "table_valid_from"]
    assert [(r["id"], r["val"]) for r in out.collect()] == [(0, "a20")]
    # Double keys cannot be hashed faithfully (-0.0 = 0.0): auto uses the SQL plan, "index" says why.
    s3 = sdf.selectExpr("id", "CAST(k AS DOUBLE) AS k", "ts")
    t3 = tdf.selectExpr("CAST(k AS DOUBLE) AS k", "ts", "val")
    out = asof_join(s3, t3, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts")
    assert _root(out) != "LogicalRDD"
    assert [(r["id"], r["val"]) for r in out.collect()] == [(0, "a20")]
    with pytest.raises(ConfigError, match="'index' cannot run here: the index cannot hash keys of "
                                          "type double"):
        asof_join(s3, t3, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts", strategy="index")
    with pytest.raises(ConfigError, match="'index_shuffle' cannot run here: the index cannot hash "
                                          "keys of type double"):
        asof_join(s3, t3, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts",
                  strategy="index_shuffle")


@pytest.mark.skipif(not INDEX_RUNS, reason=NO_INDEX)
def test_auto_shuffles_the_index_of_a_table_too_large_to_broadcast(spark: Any, tmp_path: Any) -> None:
    """Above broadcast_max_bytes the index is built per partition of both sides, shuffled on the
    key: the same answers as the broadcast index, over the session's shuffle partitions."""
    spark.createDataFrame(TABLE, TABLE_SCHEMA).write.parquet(str(tmp_path / "t"))
    tdf = spark.read.parquet(str(tmp_path / "t"))
    stream: list[StreamRow] = [(i, k, ts, None) for i, (k, ts) in enumerate(
        [(1, 9), (1, 10), (1, 35), (1, 41), (2, 49), (2, 50), (3, 20), (None, 20)])]
    sdf = spark.createDataFrame(stream, STREAM_SCHEMA)
    kwargs: dict[str, Any] = {"stream_key": "k", "stream_ts": "ts", "table_key": "k", "table_ts": "ts",
                              "how": "left"}
    shuffled = asof_join(sdf, tdf, broadcast_max_bytes=0, **kwargs)
    assert _root(shuffled) == "LogicalRDD"
    lineage = shuffled._jdf.queryExecution().analyzed().rdd().toDebugString()
    assert "ZippedPartitions" in lineage  # the shuffle form, not the broadcast index
    assert shuffled.rdd.getNumPartitions() == int(spark.conf.get("spark.sql.shuffle.partitions"))
    broadcast = asof_join(sdf, tdf, strategy="index", **kwargs)
    assert "ZippedPartitions" not in broadcast._jdf.queryExecution().analyzed().rdd().toDebugString()
    assert sorted(shuffled.collect(), key=repr) == sorted(broadcast.collect(), key=repr)
    assert len(shuffled.collect()) == len(stream)


@pytest.mark.skipif(not INDEX_RUNS, reason=NO_INDEX)
def test_index_handles_extreme_and_sparse_keys(spark: Any) -> None:
    """Keys far apart (the hashed map) and at the ends of the long range (no overflow)."""
    lo, hi = -(2**63), 2**63 - 1
    table: list[TableRow] = [(lo, 10, "lo10", False), (lo, 20, "lo20", False), (hi, 5, "hi5", False),
                             (0, 1, "z1", False), (10**15, 3, "m3", False)]
    stream: list[StreamRow] = [(0, lo, 15, None), (1, hi, 4, None), (2, hi, 2**62, None),
                               (3, 10**15, 3, None), (4, 1, 100, None), (5, lo + 1, 100, None)]
    got = run(spark, stream, table, how="left", strategy="index")
    assert got == brute_force(stream, table, how="left")


LO, HI = -(2**63), 2**63 - 1
REAL = 1_700_000_000_000
# Per key, versions spanning more than a long (min long next to real ts, min and max long) or
# sitting at one end of it; the probe ts sit at, next to and between them.
EXTREME_TABLE: list[TableRow] = [
    (1, LO, "1:lo", False), (1, -5, "1:-5", False), (1, 0, None, True), (1, REAL, "1:real", False),
    (1, HI, "1:hi", False),
    (2, LO, "2:lo", False), (2, REAL, "2:real", False),
    (3, 0, "3:0", False), (3, HI, "3:hi", False),
    (4, HI, "4:hi", False),
    (5, LO, "5:lo", False),
    (6, LO, "6:lo", False), (6, LO + 1, "6:lo+1", False),
    (7, HI - 1, "7:hi-1", False), (7, HI, "7:hi", False),
    (8, LO, "8:lo", False), (8, HI, "8:hi", False),
]
EXTREME_PROBES = [LO, LO + 1, LO + 2, -6, -5, -1, 0, 1, REAL - 1, REAL, REAL + 1, HI - 2, HI - 1, HI]


@pytest.mark.skipif(not INDEX_RUNS, reason=NO_INDEX)
def test_index_probe_hands_on_stream_rows_of_any_width_whole(spark: Any) -> None:
    """The probe keeps a batch of 256 stream rows in one buffer, grown for wide rows and reused
    by the next batch (temporaljoins.BatchProbe): every row comes out whole, with its answer.
    The table's values differ in width too (the index then keeps each version's offset)."""
    rows = [(i, i % 7, i, "x" * ((i * 37) % 500)) for i in range(1_500)]
    sdf = spark.createDataFrame(rows, "id long, k long, ts long, note string").coalesce(1)
    values = {k: f"v{k}" + "y" * (9 * k) for k in range(6)}
    tdf = spark.createDataFrame([(k, 0, v, False) for k, v in values.items()], TABLE_SCHEMA)
    joined = asof_join(sdf, tdf, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts",
                       tombstone_col="tomb", how="left", strategy="index")
    got = sorted(tuple(r) for r in joined.select("id", "k", "ts", "note", "val").collect())
    assert got == [(i, k, ts, note, values.get(k)) for i, k, ts, note in rows]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_join_that_carries_no_table_column(spark: Any, strategy: str) -> None:
    """No value column and no valid-from column: the join only says which stream rows have a
    live version (the index then holds no value bytes at all; it once read the first of none)."""
    stream: list[StreamRow] = [(0, 1, 9, None), (1, 1, 10, None), (4, 1, 35, None),
                               (5, 1, 40, None), (7, 2, 49, None), (8, 3, 20, None)]
    sdf, tdf = frames(spark, stream, TABLE)
    for how in ("inner", "left"):
        joined = asof_join(sdf, tdf, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts",
                           tombstone_col="tomb", table_value_cols=[], valid_from_col=None,
                           how=how, strategy=strategy)  # type: ignore[arg-type]
        assert joined.columns == ["id", "k", "ts", "fk"]
        got = sorted(r.id for r in joined.collect())
        # 0: before the first version; 4: a tombstone's validity; 8: an unknown key
        assert got == ([1, 5, 7] if how == "inner" else [0, 1, 4, 5, 7, 8]), how


@pytest.mark.skipif(not INDEX_RUNS, reason=NO_INDEX)
@pytest.mark.parametrize("partitions", [1, 3, 12])
@settings(max_examples=examples(3), deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), keys_held=st.sampled_from([3, 40, 700]),
       key_scale=st.sampled_from([1, 1_000_003, -(2**50)]), key_as=st.sampled_from(["long", "string"]),
       extremes=st.booleans())
def test_index_of_thousands_of_versions(spark: Any, seed: int, keys_held: int, key_scale: int,
                                        key_as: str, extremes: bool, partitions: int) -> None:
    """A task sorts a partition of more than 2,048 versions by radix (temporaljoins.VersionSort),
    passing only over the digits that vary: dense, spread and negative keys, hashed keys (every
    bit varies), timestamps from the ends of the long range to real ones. The driver merges a
    few tasks' runs by scanning their heads, many (12) through a heap (temporaljoins.Runs)."""
    import random

    rng = random.Random(seed)
    ts_choices = [lambda: rng.randrange(-10**6, 10**6), lambda: rng.randrange(REAL, REAL + 10**8)]
    if extremes:
        ts_choices.append(lambda: rng.choice([LO, LO + 1, HI - 1, HI]))
    versions: dict[tuple[int, int], tuple[str, bool]] = {}
    while len(versions) < 3_000:
        versions[(rng.randrange(keys_held) * key_scale, rng.choice(ts_choices)())] = (
            f"v{len(versions)}", rng.random() < 0.05)
    table = [(k, ts, val, tomb) for (k, ts), (val, tomb) in versions.items()]
    picks = [rng.choice(table) for _ in range(300)]
    stream = [(i, k, min(HI, max(LO, ts + rng.choice([-1, 0, 1]))), None)
              for i, (k, ts, _, _) in enumerate(picks)]
    stream += [(300, keys_held * key_scale + 1, 0, None), (301, None, 5, None)]
    sdf, tdf = frames(spark, stream, table, key_as)
    tdf = tdf.coalesce(1) if partitions == 1 else tdf.repartition(partitions)
    joined = asof_join(sdf, tdf, stream_key="k", stream_ts="ts", table_key="k",
                       table_ts="ts", tombstone_col="tomb", how="left", strategy="index")
    got = sorted(((r[0], r[1], r[2]) for r in joined.select("id", "val", "table_valid_from").collect()),
                 key=repr)
    assert got == brute_force(stream, table, how="left")


@pytest.mark.parametrize("versions_per_bucket", [1, 2])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_ts_at_the_ends_of_the_long_range(spark: Any, strategy: str, versions_per_bucket: int) -> None:
    """Versions of one key spanning close to (or all of) 2^64 ms: the SQL plans' bucket
    arithmetic must not overflow under ANSI mode, and every strategy answers as a scan would."""
    stream: list[StreamRow] = [(i * 100 + j, k, ts, None) for i, k in enumerate(range(1, 10))
                               for j, ts in enumerate(EXTREME_PROBES)]
    for retention, stream_time in [(None, None), (0, None), (10, None), (5, LO), (3, HI), (HI, LO)]:
        got = run(spark, stream, EXTREME_TABLE, how="left", strategy=strategy,
                  versions_per_bucket=versions_per_bucket, history_retention_ms=retention,
                  table_stream_time=stream_time)
        assert got == brute_force(stream, EXTREME_TABLE, how="left", retention=retention,
                                  stream_time=stream_time), (retention, stream_time)


def test_buckets_of_a_key_spanning_the_long_range(spark: Any) -> None:
    """A key whose span exceeds a long takes its offsets on halved ts (shift 1); every version
    lands in the buckets its interval covers, in order."""
    tdf = spark.createDataFrame(EXTREME_TABLE, TABLE_SCHEMA)
    stats = {r["key"]: r for r in bucket_stats(tdf, table_key="k", table_ts="ts",
                                               versions_per_bucket=1).collect()}
    assert {k for k, r in stats.items() if r["shift"] == 1} == {1, 2, 8}
    assert all(1 <= r["width"] <= HI for r in stats.values())
    intervals = versions_by_bucket(tdf, table_key="k", table_ts="ts", tombstone_col="tomb",
                                   versions_per_bucket=1)
    rows = intervals.where("key = 1").orderBy("valid_from", "bucket").collect()
    buckets = [r["bucket"] for r in rows]
    assert buckets == sorted(buckets) and buckets[-1] == stats[1]["buckets"] - 1


@pytest.mark.skipif(not INDEX_RUNS, reason=NO_INDEX)
def test_hashed_keys_check_the_key_itself(spark: Any) -> None:
    """Hashed keys, driven through the JVM entry points with a forged hash column: a stream key
    that shares a table key's hash gets no answer, and two table keys sharing one are refused."""
    entry = jvm.entry(spark)
    table = spark.createDataFrame([("a", 10, "a10", 7)], "k string, ts long, val string, h long")
    stream = spark.createDataFrame([(0, "a", 15, 7), (1, "b", 15, 7)], "id long, k string, ts long, h long")
    args = [["null ts"], ["dup"]]
    index = entry.index(table._jdf, 3, 1, -1, [2, 0], ["val", "k_copy"], False, 0, False, 0, *args, 1)
    joined = DataFrame(entry.probe(stream._jdf, 3, 2, index, True, ["null ts"], 1, 1), spark)
    assert sorted((r["id"], r["val"]) for r in joined.collect()) == [(0, "a10"), (1, None)]
    schema = "k string, ts long, val string, h long"
    # Two keys sharing a hash, at different ts and at the same ts (not a duplicate version).
    for clash in ([("a", 10, "a10", 7), ("b", 11, "b11", 7)], [("a", 10, "a10", 7), ("b", 10, "b10", 7)]):
        with pytest.raises(Exception, match="HASH_COLLISION"):
            entry.index(spark.createDataFrame(clash, schema)._jdf, 3, 1, -1, [2, 0], ["val", "k_copy"],
                        False, 0, False, 0, *args, 1)
        # The shuffled index finds it in the task that holds both keys.
        clashing = spark.createDataFrame(clash, schema).repartition(2, "h")
        shuffled = jvm.shuffled_entry(spark).join(
            stream.repartition(2, "h")._jdf, 3, 2, clashing._jdf, 3, 1, -1, [2, 0], ["val", "k_copy"],
            False, 0, False, 0, True, ["null ts"], *args, 1, 1)
        with pytest.raises(Exception, match="HASH_COLLISION"):
            DataFrame(shuffled, spark).collect()
    with pytest.raises(Exception, match="the stream has 3 partitions and the table 2; both must be "
                                        "partitioned alike"):
        jvm.shuffled_entry(spark).join(stream.repartition(3, "h")._jdf, 3, 2, table.repartition(2, "h")._jdf,
                                       3, 1, -1, [2, 0], ["val", "k_copy"], False, 0, False, 0, True,
                                       ["null ts"], *args, 1, 1)


def test_hot_key_is_split_over_many_buckets(spark: Any) -> None:
    """A hot key gets buckets in proportion to its versions; a lookup sees only its bucket."""
    hot_versions = 60
    table: list[TableRow] = [(0, 10 * i, f"h{i}", i % 7 == 3) for i in range(hot_versions)]
    table += [(1, 5, "c", False), (2, 7, "d", False)]
    stream: list[StreamRow] = [(i, 0, 3 * i + 1, None) for i in range(200)]
    stream += [(1000, 1, 6, None), (1001, 2, 1, None)]
    tdf = spark.createDataFrame(table, TABLE_SCHEMA)

    stats = {r[0]: r for r in bucket_stats(tdf, table_key="k", table_ts="ts",
                                           versions_per_bucket=1).collect()}
    assert stats[0][3] == hot_versions and stats[1][3] == 1
    buckets = versions_by_bucket(tdf, table_key="k", table_ts="ts", tombstone_col="tomb",
                                     versions_per_bucket=1)
    per_bucket = buckets.where("key = 0").groupBy("bucket").count().collect()
    # One bucket per version; a bucket covered only by a tombstone's interval holds no row.
    tombstones = sum(1 for k, _, _, tomb in table if k == 0 and tomb)
    assert len(per_bucket) == hot_versions - tombstones
    # Each bucket holds the version starting in it plus at most the one carried over into it.
    assert max(r["count"] for r in per_bucket) <= 2

    for strategy in RUNNABLE:
        got = run(spark, stream, table, how="left", versions_per_bucket=1, strategy=strategy)
        assert got == brute_force(stream, table, how="left")


# --- property: random data, a hot key, duplicate stream ts, tombstones, retention --------------

keys = st.one_of(st.just(0), st.just(0), st.just(0), st.integers(1, 4))
# Now and then a version "since forever" or "until the end of time", so that a key's versions
# span more than a long.
version_ts = st.one_of(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.sampled_from([LO, HI]))
probe_ts = st.one_of(st.integers(-3, 45), st.integers(-3, 45), st.integers(-3, 45),
                     st.sampled_from([LO, LO + 1, HI - 1, HI]))


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    versions = draw(st.dictionaries(st.tuples(keys, version_ts),
                                    st.tuples(st.sampled_from(["x", "y", "z"]), st.booleans()),
                                    min_size=6, max_size=25))
    # Cold keys' versions sit in the first half of time, so their latest version is often older
    # than the expiry bound (the latest-never-expires case); the hot key spans all of it.
    table = [(k, ts if k == 0 or ts in (LO, HI) else ts // 2, val, tomb)
             for (k, ts), (val, tomb) in versions.items()]
    table = list({(k, ts): (k, ts, val, tomb) for k, ts, val, tomb in table}.values())
    n = draw(st.integers(8, 25))
    maybe_key = st.one_of(keys, keys, keys, st.none())
    stream = [(i, draw(maybe_key), draw(probe_ts), draw(maybe_key)) for i in range(n)]
    # Spread keys apart (and below zero): the JVM index then hashes them instead of addressing
    # them directly.
    scale = draw(st.sampled_from([1, 1, 1_000_003, -(2**61)]))
    table = [(k * scale, ts, val, tomb) for k, ts, val, tomb in table]
    stream = [(i, None if k is None else k * scale, ts, None if fk is None else fk * scale)
              for i, k, ts, fk in stream]
    return {
        "table": table, "stream": stream,
        "how": draw(st.sampled_from(["inner", "left"])),
        # Mostly with retention, small enough that lookups fall behind the bound and exercise
        # the latest-never-expires rule.
        "retention": draw(st.sampled_from([None, 0, 4, 8, 12])),
        "use_fk": draw(st.booleans()),
        "versions_per_bucket": draw(st.integers(1, 3)),
        "strategy": draw(st.sampled_from(RUNNABLE)),
        "key_as": draw(st.sampled_from(["long", "long", "string", "struct"])),
    }


@settings(max_examples=examples(25), deadline=None, database=None)
@given(cases())
def test_matches_brute_force(spark: Any, case: dict[str, Any]) -> None:
    expected = brute_force(case["stream"], case["table"], how=case["how"], retention=case["retention"],
                           use_fk=case["use_fk"])
    if not case["use_fk"]:
        assert expected == store_oracle(case["stream"], case["table"], how=case["how"],
                                        retention=case["retention"])
    got = run(spark, case["stream"], case["table"], how=case["how"],
              history_retention_ms=case["retention"], table_key_from="fk" if case["use_fk"] else None,
              versions_per_bucket=case["versions_per_bucket"], strategy=case["strategy"],
              key_as=case["key_as"])
    assert got == expected


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_callers_cached_inputs_stay_cached(spark: Any, strategy: str) -> None:
    """Planning the join must not unpersist what the caller persisted (the SQL plans go through
    temporary views, and dropping a view uncaches plans equal to it)."""
    sdf = spark.createDataFrame([(0, 1, 25, None)], STREAM_SCHEMA).persist()
    tdf = spark.createDataFrame(TABLE, TABLE_SCHEMA).persist()
    sdf.count(), tdf.count()

    def cached(df: Any) -> bool:
        # The cache manager's view of the plan (a Connect session asks the server).
        level = df.storageLevel
        return bool(level.useMemory or level.useDisk)

    try:
        assert cached(sdf) and cached(tdf)
        out = asof_join(sdf, tdf, stream_key="k", stream_ts="ts", table_key="k", table_ts="ts",
                        strategy=strategy)  # type: ignore[arg-type]
        assert [(r["id"], r["val"]) for r in out.collect()] == [(0, "a20")]
        assert cached(sdf) and cached(tdf)
    finally:
        sdf.unpersist(), tdf.unpersist()
