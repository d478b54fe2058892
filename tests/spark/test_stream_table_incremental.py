"""The Spark incremental stream-table join (issue 4, item 2) against the reference engine.

The oracle is the record-at-a-time reference processor driven by the micro-batch rule
(`joins.microbatch`): same batches, same items in the same order, same counters. Every Spark
micro-batch costs seconds here, so inputs are tiny and batches few; the long runs are `slow`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joins.asof import HELD_MAX_ROWS
from joins.core.operator import Item
from joins.microbatch import run_batches, run_reference
from joins.operators.stream_table_join import DEFINITION
from joins.operators.stream_table_join.columns import EMIT_SEQ, LATE, TABLE_KEY
from joins.operators.stream_table_join.grace import CLASS, FATE, decide
from joins.operators.stream_table_join.late import late_reason, late_reason_text
from joins.operators.stream_table_join.reference import GraceBuffer, StreamTableJoinProcessor
from joins.operators.stream_table_join.report import (
    MAX_ELIGIBLE,
    decision_metrics,
    max_eligible_metric,
    no_records_counts,
)
from joins.operators.stream_table_join.sequential import (
    SEQUENTIAL_MAX_ROWS,
    decide_in_one_task,
    sequential_decision,
)
from joins.operators.stream_table_join.spark_replay import ReplayLake, spark_replay
from joins.operators.stream_table_join.spec import (
    StreamTableJoinSpec,
    StreamTableRecord,
    parse_stream_table_record,
)
from joins.versioned.prefix import MAX_BLOCKS, P_BEFORE, prefix_stream_time
from tests.budget import spark_examples
from tests.replay_command import replay
from tests.spark.test_asof_join import INDEX_RUNS

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"


# ---- helpers shared with the crash and backfill tests ---------------------------------------


def spec_of(config: dict[str, Any]) -> StreamTableJoinSpec:
    return StreamTableJoinSpec.model_validate(config)


def records_of(raw: Sequence[dict[str, Any]], start: int = 0) -> list[StreamTableRecord]:
    return [parse_stream_table_record({**r, "i": start + n}, start + n) for n, r in enumerate(raw)]


def reference_items(spec: StreamTableJoinSpec, batches: Sequence[Sequence[StreamTableRecord]],
                    metrics: dict[str, int] | None = None) -> list[Item]:
    """The reference engine over explicit (possibly uneven) micro-batches."""
    return run_batches(DEFINITION, spec, batches, metrics)


def spark_items(replay: ReplayLake, batches: Sequence[Sequence[StreamTableRecord]],
                metrics: dict[str, int] | None = None, **run: Any) -> list[Item]:
    """Land and run the batches one by one, then read the items back in emission order."""
    last: dict[int, int] = {}
    counters: dict[str, int] = {}
    for n, batch in enumerate(batches, start=1):
        for name, count in replay.land(batch, n).items():
            counters[name] = counters.get(name, 0) + count
        report = replay.run(**run)
        if report.skipped:
            continue
        last[report.batch_id] = batch[-1].i
        for name in ("skipped_null_value", "skipped_null_key", "inner_unmatched", "late_joined",
                     "late_dropped", "quarantined", "lookup_beyond_history_retention"):
            counters[name] = counters.get(name, 0) + getattr(report, name)
        counters["buffered"] = report.still_buffered
    if metrics is not None:
        metrics.update(counters)
    return [{**item, "after_input": last[bid]} for bid, *_rest, item in replay.ordered_rows()]


def nonzero(metrics: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in metrics.items() if v}


def assert_same_as_reference(spark: Any, tmp_path: Path, config: dict[str, Any],
                             raw: Sequence[dict[str, Any]], cuts: Sequence[int],
                             **run: Any) -> list[Item]:
    """Run `raw` cut into batches of the sizes in `cuts` on both engines; items and counters
    must be equal. Returns the items. `run`: options of `run_microbatch` (e.g.
    sequential_max_rows=0: every batch decided set-wise)."""
    spec = spec_of(config)
    records = records_of(raw)
    batches, pos = [], 0
    for size in cuts:
        if pos < len(records):
            batches.append(records[pos:pos + size])
            pos += size
    if pos < len(records):
        batches.append(records[pos:])
    want_metrics: dict[str, int] = {}
    want = reference_items(spec, batches, want_metrics)
    got_metrics: dict[str, int] = {}
    got = spark_items(ReplayLake(spark, spec, str(tmp_path)), batches, got_metrics, **run)
    assert got == want
    assert nonzero(got_metrics) == nonzero(want_metrics)
    return got


# ---- the batch decision alone (no Delta): grace buffer vs the reference GraceBuffer ----------

STREAM_SCHEMA = "key string, value string, ts long, event_date string, _seq long"
STREAM_COLS = ["key", "value", "ts", "event_date", "_seq"]


def simulate_buffer(records: list[tuple[str | None, int, int]], buffered: list[tuple[int, int]],
                    grace: int, stream_time: int | None, late: str):
    """The reference GraceBuffer fed one record at a time: (seq, emitted after, late) of every
    join in emission order, quarantine (seq, reason), what stays buffered, final stream time."""
    buffer = GraceBuffer(grace)
    buffer.stream_time = stream_time
    for ts, seq in buffered:
        buffer.put(StreamTableRecord(i=seq, side="stream", key="k", value="v", ts=ts), "k")
    buffer.stream_time = stream_time
    joins, quarantine = [], []
    for value, ts, seq in records:
        if value is None:
            continue
        if buffer.is_late(ts):
            if late == "join":
                joins.append((seq, seq, True))
            elif late == "quarantine":
                assert buffer.stream_time is not None
                quarantine.append((seq, late_reason_text(ts, buffer.stream_time, grace)))
            continue
        buffer.put(StreamTableRecord(i=seq, side="stream", key="k", value=value, ts=ts), "k")
        joins.extend((r.i, seq, False) for r, _ in buffer.evict())
    return joins, quarantine, sorted(i for _, i, _, _ in buffer._heap), buffer.stream_time


@st.composite
def grace_batches(draw: st.DrawFn) -> dict[str, Any]:
    grace = draw(st.sampled_from([0, 1, 3]))
    stream_time = draw(st.one_of(st.none(), st.integers(5, 10)))
    buffered: list[tuple[int, int]] = []
    if stream_time is not None and grace:
        # A buffer left by earlier batches holds only records newer than stream time - grace.
        tss = draw(st.lists(st.integers(stream_time - grace + 1, stream_time), max_size=2))
        buffered = [(ts, -10 + n) for n, ts in enumerate(tss)]
    n = draw(st.integers(1, 9))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))  # sparse arrival indices
    seqs = [sum(gaps[:k + 1]) for k in range(n)]
    records = [(draw(st.sampled_from(["v", "v", "v", None])), draw(st.integers(0, 16)), seq)
               for seq in seqs]
    return {"grace": grace, "stream_time": stream_time, "buffered": buffered, "records": records,
            "late": draw(st.sampled_from(["join", "drop", "quarantine"])),
            "block_rows": draw(st.sampled_from([1, 2, 3, 1000]))}


# The JVM's kernel runs where the as-of index does (a classic session with the engine's jar).
PATHS = ["set-wise", "jvm", "python"] if INDEX_RUNS else ["set-wise", "python"]


def decide_spark(spark: Any, case: dict[str, Any], *, grace: int | None = None,
                 path: str = "set-wise"):
    """`case` decided by the set-wise path (`grace.decide`) or record at a time in one task
    (`sequential.py`, by the JVM's kernel or the Python worker's), read back as
    `simulate_buffer` says it."""
    from pyspark.sql import functions as F

    grace = case["grace"] if grace is None else grace
    spec = spec_of({"join": "left", "table": {"versioned": True, "history_retention_ms": 100},
                    "grace_ms": grace, "late": case["late"]})
    new = spark.createDataFrame([("k", v, ts, "d", seq) for v, ts, seq in case["records"]],
                                STREAM_SCHEMA).withColumn(TABLE_KEY, F.col("key"))
    buf = spark.createDataFrame([("k", "v", ts, "d", seq) for ts, seq in case["buffered"]],
                                STREAM_SCHEMA).withColumn(TABLE_KEY, F.col("key"))
    if path != "set-wise":
        frame = decide_in_one_task(new, buf, spec, stream_cols=STREAM_COLS, value_cols=["value"],
                                   ts="ts", seq="_seq", stream_time_before=case["stream_time"],
                                   kernel=path)
        metrics = {MAX_ELIGIBLE: max_eligible_metric("ts")}
        row = frame.agg(*(e.alias(n) for n, e in metrics.items())).first().asDict()
        d = sequential_decision(frame.localCheckpoint(), row, spec, stream_cols=STREAM_COLS,
                                ts="ts", stream_time_before=case["stream_time"])
    else:
        d = decide(new, buf, spec, stream_cols=STREAM_COLS, value_cols=["value"], ts="ts",
                   seq="_seq", stream_time_before=case["stream_time"],
                   block_rows=case["block_rows"])
    ts_of = {seq: ts for _, ts, seq in case["records"]} | {seq: ts for ts, seq in case["buffered"]}
    joined = sorted(((r["_seq"], r[EMIT_SEQ], r[LATE]) for r in d.to_join.collect()),
                    key=lambda t: (t[1], ts_of[t[0]], t[0]))
    quarantine = sorted((r["_seq"], r["reason"]) for r in d.quarantine.collect()) \
        if d.quarantine is not None else []
    kept = sorted(r["_seq"] for r in d.buffer_after.collect())
    return joined, quarantine, kept, d.stream_time_after


@spark_examples(12)
@given(case=grace_batches(), path=st.sampled_from(PATHS))
def test_batch_decision_equals_record_at_a_time_buffer(spark: Any, case: dict[str, Any],
                                                       path: str) -> None:
    """Late records, evictions (and the put that evicted each), quarantine reasons, what stays
    buffered and the stream time: decided set-wise, or in one task (either kernel), exactly as
    one record at a time."""
    want = simulate_buffer(case["records"], case["buffered"], case["grace"], case["stream_time"],
                           case["late"])
    want = (want[0], sorted(want[1]), want[2], want[3])
    assert decide_spark(spark, case, path=path) == want


@pytest.mark.parametrize("path", PATHS)
def test_a_wrong_grace_is_caught(spark: Any, path: str) -> None:
    """The comparison above can fail: the same batch decided with grace off by one differs."""
    case = {"grace": 2, "stream_time": 10, "buffered": [(9, -1)], "late": "join", "block_rows": 1,
            "records": [("v", 12, 1), ("v", 10, 2), ("v", 15, 4), ("v", 11, 5)]}
    want = simulate_buffer(case["records"], case["buffered"], 2, 10, "join")
    assert decide_spark(spark, case, path=path) == (want[0], want[1], want[2], want[3])
    assert decide_spark(spark, case, grace=3, path=path) != (want[0], want[1], want[2], want[3])


@st.composite
def kernel_cases(draw: st.DrawFn) -> dict[str, Any]:
    """Batches for the two one-task kernels: null values, null table keys, null ts on records
    that are skipped anyway (a null ts elsewhere fails the batch), inner and left joins, with
    and without grace, every late mode, a batch id or none."""
    grace = draw(st.sampled_from([None, 0, 1, 3]))
    before = draw(st.one_of(st.none(), st.integers(5, 10)))
    inner = draw(st.booleans())
    rows = []
    if grace and before is not None:
        for n, ts in enumerate(draw(st.lists(st.integers(before - grace + 1, before), max_size=2))):
            rows.append(("k", "v", ts, -10 + n, "k", True))
    seq = 0
    for _ in range(draw(st.integers(0, 9))):
        seq += draw(st.integers(1, 3))
        value = draw(st.sampled_from(["v", "v", None]))
        table_key = draw(st.sampled_from(["k", "k", None]))
        skipped = value is None or (inner and table_key is None)
        ts = draw(st.one_of(st.none(), st.integers(0, 16)) if skipped else st.integers(0, 16))
        rows.append(("k", value, ts, seq, table_key, False))
    return {"rows": rows, "grace": grace, "before": before, "inner": inner,
            "late": "join" if grace is None else draw(st.sampled_from(["join", "drop", "quarantine"])),
            "batch_id": draw(st.sampled_from([None, 7]))}


@pytest.mark.skipif(not INDEX_RUNS, reason="the JVM's kernel needs the engine's JVM classes")
@spark_examples(25)
@given(case=kernel_cases())
def test_one_task_kernels_agree(spark: Any, case: dict[str, Any]) -> None:
    """The JVM's kernel (`temporaljoins.GraceDecision`) decides every row as the Python
    worker's (the reference's GraceBuffer, held equal to one record at a time above): every
    column of every row, buffered ones included."""
    schema = "key string, value string, ts long, event_date string, _seq long, " \
             f"{TABLE_KEY} string"
    spec = spec_of({"join": "inner" if case["inner"] else "left",
                    "table": {"versioned": True, "history_retention_ms": 100},
                    "grace_ms": case["grace"], "late": case["late"]})

    def frame(buffered: bool) -> Any:
        return spark.createDataFrame([(k, v, ts, "d", seq, tk) for k, v, ts, seq, tk, b
                                      in case["rows"] if b == buffered], schema)

    decided = {kernel: sorted((tuple(r) for r in decide_in_one_task(
        frame(False), frame(True), spec, stream_cols=STREAM_COLS, value_cols=["value"], ts="ts",
        seq="_seq", stream_time_before=case["before"], batch_id=case["batch_id"],
        kernel=kernel).collect()), key=repr) for kernel in ("jvm", "python")}
    assert decided["jvm"] == decided["python"]
    assert len(decided["jvm"]) == len(case["rows"])


def test_prefix_stream_time_over_many_sparse_blocks(spark: Any) -> None:
    """More arrival-index blocks than may be collected: the scan widens its blocks and the
    stream time each record sees is still the exact running max (nulls never count)."""
    import random

    rng = random.Random(7)
    rows, seq = [], 0
    for _ in range(600):
        seq += rng.randint(1, 1000)
        rows.append((seq, rng.choice([None, rng.randint(0, 10_000)])))
    df = spark.createDataFrame(rows, "_seq long, ts long")
    scan = prefix_stream_time(df, ts_col="ts", seq_col="_seq", stream_time_before=50, block_rows=1)
    assert 1 < len(scan.blocks) <= MAX_BLOCKS
    want, running = {}, 50
    for s, ts in rows:
        want[s] = running
        running = running if ts is None else max(running, ts)
    assert {r["_seq"]: r[P_BEFORE] for r in scan.frame.collect()} == want
    assert scan.stream_time_after == running


def test_a_batch_without_records_counts_what_spark_counts_over_no_rows(spark: Any) -> None:
    """A batch without new stream records runs no decision job: its counts are the decision's
    aggregates over no rows, name for name."""
    frame = spark.createDataFrame([], f"{CLASS} string, {P_BEFORE} long, {FATE} string, "
                                      "ts long, _seq long")
    row = frame.agg(*(m.alias(n) for n, m in decision_metrics("ts", "_seq").items())).first()
    assert row is not None
    assert row.asDict() == no_records_counts()


def test_late_reason_expression_matches_reference(spark: Any) -> None:
    """The Spark reason expression words a late record exactly as the reference processor."""
    processor = StreamTableJoinProcessor(spec_of(
        {"join": "left", "table": {"versioned": True, "history_retention_ms": 10}, "grace_ms": 2,
         "late": "quarantine"}))
    processor.process(StreamTableRecord(i=0, side="stream", key="k", value="v", ts=10))
    [item] = processor.process(StreamTableRecord(i=1, side="stream", key="k", value="v", ts=5))
    row = spark.range(1).select(late_reason("CAST(5 AS BIGINT)", "CAST(10 AS BIGINT)", 2)
                                .alias("r")).first()
    assert row["r"] == late_reason_text(5, 10, 2) == item["reason"]
    # Real event times and a grace of half an hour, in any session zone.
    st, ts = 1_709_423_917_750, 1_709_253_000_000
    row = spark.range(1).select(late_reason(str(ts), str(st), 1_800_000).alias("r")).first()
    assert row["r"] == late_reason_text(ts, st, 1_800_000)
    assert "minus grace 30 min (= 2024-03-02T23:28:37.750Z)" in row["r"]


# ---- the whole micro-batch on Delta against the reference engine -----------------------------

SEED_001 = [  # the seed's table (versions at ts 1, 2, 3) and stream d@4, e@1, f@2, g@2, h@3
    {"side": "table", "key": 1, "value": "a", "ts": 1},
    {"side": "table", "key": 2, "value": "b", "ts": 1},
    {"side": "table", "key": 3, "value": "c", "ts": 1},
    {"side": "table", "key": 2, "value": "x", "ts": 2},
    {"side": "table", "key": 3, "value": "c", "ts": 2},
    {"side": "table", "key": 3, "value": "y", "ts": 3},
    {"side": "stream", "key": 1, "value": "d", "ts": 4},
    {"side": "stream", "key": 2, "value": "e", "ts": 1},
    {"side": "stream", "key": 3, "value": "f", "ts": 2},
    {"side": "stream", "key": 2, "value": "g", "ts": 2},
    {"side": "stream", "key": 3, "value": "h", "ts": 3},
    {"side": "stream", "key": 9, "value": "z", "ts": 30},  # moves stream time past grace
]


# Both ways a batch is decided (`decide.py`): in one task (small batches), set-wise (0).
DECIDERS = pytest.mark.parametrize("sequential_max_rows", [SEQUENTIAL_MAX_ROWS, 0],
                                   ids=["one task", "set-wise"])


@DECIDERS
def test_seed_001_grace_example(spark: Any, tmp_path: Path, sequential_max_rows: int) -> None:
    """KIP-923's example: with grace the join output is 2eb, 3fc, 2gx, 3hy, 1da whatever the
    interleaving; here the table and the stream arrive in two batches."""
    config = {"join": "left", "table": {"versioned": True, "history_retention_ms": 100},
              "grace_ms": 10}
    items = assert_same_as_reference(spark, tmp_path, config, SEED_001, cuts=[7],
                                     sequential_max_rows=sequential_max_rows)
    assert [(i["key"], i["value"][0] + i["value"][1]) for i in items] == \
        [(2, "eb"), (3, "fc"), (2, "gx"), (3, "hy"), (1, "da")]


LATE_STREAM = [
    {"side": "table", "key": "k", "value": "a", "ts": 0},
    {"side": "stream", "key": "k", "value": "x", "ts": 10},
    {"side": "stream", "key": "k", "value": None, "ts": 40},   # skipped: never moves stream time
    {"side": "stream", "key": "k", "value": "v", "ts": 9},
    {"side": "table", "key": "k", "value": "b", "ts": 7},
    {"side": "stream", "key": "k", "value": "y", "ts": 5},     # late: 5 < 10 - 2
    {"side": "stream", "key": "k", "value": "z", "ts": 8},     # at the bound: evicted at once
    {"side": "stream", "key": "k", "value": "w", "ts": 13},    # evicts v and x, stays buffered
    {"side": "stream", "key": "k", "value": "u", "ts": 3},     # late
]


@pytest.mark.parametrize("late", ["join", "drop", "quarantine"])
@DECIDERS
def test_late_policies(spark: Any, tmp_path: Path, late: str, sequential_max_rows: int) -> None:
    config = {"join": "left", "table": {"versioned": True, "history_retention_ms": 10},
              "grace_ms": 2, "late": late}
    items = assert_same_as_reference(spark, tmp_path, config, LATE_STREAM, cuts=[4, 5],
                                     sequential_max_rows=sequential_max_rows)
    quarantined = [i for i in items if "quarantined" in i]
    assert len(quarantined) == (2 if late == "quarantine" else 0)
    assert all("grace" in i["reason"] for i in quarantined)


UNVERSIONED = [
    {"side": "table", "key": "c1", "value": {"name": "ann"}, "ts": 5},
    {"side": "table", "key": "c2", "value": "bob", "ts": 1},
    {"side": "stream", "key": "o1", "value": {"customer": "c1", "n": 1}, "ts": 2},
    {"side": "stream", "key": "o2", "value": {"customer": "c2"}, "ts": 9},
    {"side": "table", "key": "c1", "value": "ann-2", "ts": 0},  # latest by arrival, not by ts
    {"side": "table", "key": "c2", "value": None, "ts": 3},     # tombstone
    {"side": "stream", "key": "o3", "value": {"customer": "c1"}, "ts": 1},
    {"side": "stream", "key": "o4", "value": {"customer": "c2"}, "ts": 4},
    {"side": "stream", "key": "o5", "value": {"n": 2}, "ts": 4},            # null table key
    {"side": "stream", "key": "o6", "value": None, "ts": 4},                # null value
    {"side": "table", "key": None, "value": "x", "ts": 4},                  # null table key
]


@pytest.mark.parametrize("join", ["inner", "left"])
def test_unversioned_table_with_table_key(spark: Any, tmp_path: Path, join: str) -> None:
    config = {"join": join, "table": {"versioned": False}, "table_key": "customer"}
    items = assert_same_as_reference(spark, tmp_path, config, UNVERSIONED, cuts=[4, 7])
    assert {"key": "o3", "value": [{"customer": "c1"}, "ann-2"], "ts": 1, "after_input": 10} in items


def test_unversioned_keyed_state_is_compacted(spark: Any, tmp_path: Path) -> None:
    """Every COMPACT_EVERY batches the keyed state log is rewritten as one row per live key;
    lookups after it answer as before."""
    from joins import lake
    from joins.incremental import COMPACT_EVERY

    spec = spec_of({"join": "left", "table": {"versioned": False}})
    replay = ReplayLake(spark, spec, str(tmp_path))
    raw = [{"side": "table", "key": "a", "value": "a1", "ts": 1},
           {"side": "table", "key": "b", "value": "b1", "ts": 1},
           {"side": "stream", "key": "a", "value": "s1", "ts": 2}]
    replay.land(records_of(raw), 1)
    replay.run(batch_id=COMPACT_EVERY - 2)
    more = [{"side": "table", "key": "a", "value": "a2", "ts": 0},
            {"side": "table", "key": "b", "value": None, "ts": 3},
            {"side": "stream", "key": "b", "value": "s2", "ts": 4}]
    replay.land(records_of(more, start=3), 2)
    replay.run()  # batch COMPACT_EVERY - 1: compacts after its done record
    state = lake.read_delta(spark, replay.paths.unversioned_table).collect()
    assert [(r["key"], r["value"]) for r in state] == [('"a"', '"a2"')]
    last = [{"side": "stream", "key": "a", "value": "s3", "ts": 5},
            {"side": "stream", "key": "b", "value": "s4", "ts": 5}]
    replay.land(records_of(last, start=6), 3)
    replay.run()
    assert [item["value"] for *_l, item in replay.ordered_rows()] == \
        [["s1", "a1"], ["s2", None], ["s3", "a2"], ["s4", None]]


VERSIONED_NO_GRACE = [
    {"side": "table", "key": 1, "value": "a", "ts": 0},
    {"side": "table", "key": 1, "value": "b", "ts": 10},
    {"side": "table", "key": 2, "value": "p", "ts": 3},
    {"side": "stream", "key": 1, "value": "s1", "ts": 5},
    {"side": "stream", "key": 2, "value": "s2", "ts": 2},       # before the key's first version
    {"side": "table", "key": 2, "value": None, "ts": 6},        # tombstone
    {"side": "table", "key": 1, "value": "c", "ts": 30},        # stream time 30: retention 10
    {"side": "stream", "key": 1, "value": "s3", "ts": 12},      # beyond retention: latest only
    {"side": "stream", "key": 2, "value": "s4", "ts": 7},       # tombstoned
    {"side": "stream", "key": 1, "value": "s5", "ts": 31},
    {"side": "stream", "key": None, "value": "s6", "ts": 31},
    {"side": "table", "key": 3, "value": "old", "ts": 1},       # expired put: not stored
]


@pytest.mark.slow
@pytest.mark.parametrize("join", ["inner", "left"])
def test_versioned_table_without_grace(spark: Any, tmp_path: Path, join: str) -> None:
    config = {"join": join, "table": {"versioned": True, "history_retention_ms": 10}}
    assert_same_as_reference(spark, tmp_path, config, VERSIONED_NO_GRACE, cuts=[5, 2, 5])


@DECIDERS
def test_report_of_a_batch(spark: Any, tmp_path: Path, sequential_max_rows: int) -> None:
    """The report carries what the Dagster layer shows (the same whichever way the batch was
    decided); a committed batch re-run by id is a skipped no-op, and a run with no new data
    says so."""
    spec = spec_of({"join": "left", "table": {"versioned": True, "history_retention_ms": 100},
                    "grace_ms": 2, "late": "quarantine"})
    replay = ReplayLake(spark, spec, str(tmp_path))
    replay.land(records_of(LATE_STREAM), 1)
    report = replay.run(sequential_max_rows=sequential_max_rows)
    # The set-wise path scans the batch for its stream time first; one task needs no such phase.
    assert ("stream time" in report.timings) == (sequential_max_rows == 0)
    assert report.batch_id == 0 and not report.skipped
    assert (report.rows_in_stream, report.rows_in_table) == (7, 2)
    assert report.rows_out == 3 and report.quarantined == 2 and report.still_buffered == 1
    assert report.evicted == 3
    assert report.skipped_null_value == 1
    assert report.stream_time == 13 and report.table_stream_time == 7
    assert report.event_days_touched == ("1970-01-01",)
    assert report.lateness.records == 6 and report.lateness.max_ms == 10
    assert sum(n for _, n in report.lateness.histogram) == 6
    assert set(report.commits) == {"output", "quarantine", "buffer", "checkpoints"}
    again = replay.run(batch_id=0)
    assert again.skipped and again.rows_out == 3 and "already committed" in (again.skip_reason or "")
    idle = replay.run()
    assert idle.skipped and idle.batch_id is None and "no new" in (idle.skip_reason or "")


# ---- property: random inputs, random batch splits --------------------------------------------


@st.composite
def join_cases(draw: st.DrawFn) -> dict[str, Any]:
    versioned = draw(st.booleans())
    config: dict[str, Any] = {"join": draw(st.sampled_from(["inner", "left"])),
                              "table": {"versioned": versioned}}
    if versioned:
        retention = draw(st.sampled_from([4, 100]))
        config["table"]["history_retention_ms"] = retention
        grace = draw(st.one_of(st.none(), st.sampled_from([0, 2, 4])))
        if grace is not None:
            config["grace_ms"] = grace
            config["late"] = draw(st.sampled_from(["join", "drop", "quarantine"]))
    table_key = draw(st.booleans())
    if table_key:
        config["table_key"] = "ref"
    n = draw(st.integers(2, 9))
    raw = []
    for _ in range(n):
        side = draw(st.sampled_from(["stream", "table"]))
        ts = draw(st.integers(0, 12))
        # 1, 1.0 and true are three keys (joins.core.keys), in both engines.
        if side == "table":
            raw.append({"side": side, "key": draw(st.sampled_from(["a", "b", 1, 1.0])), "ts": ts,
                        "value": draw(st.sampled_from(["x", "y", None, {"o": 1}]))})
        else:
            value = draw(st.sampled_from(["s", "t", None])) if not table_key else \
                draw(st.sampled_from([{"ref": "a"}, {"ref": 1}, {"ref": 1.0}, {"ref": None}, None]))
            raw.append({"side": side, "key": draw(st.sampled_from(["a", "b", 1, 1.0, True, None])),
                        "ts": ts, "value": value})
    cuts = draw(st.lists(st.integers(1, n), min_size=1, max_size=3))
    # Each batch decided in one task (the default for small batches), set-wise (0), or either,
    # batch by batch, as its size and the buffer's fall on either side of the threshold (3).
    sequential_max_rows = draw(st.sampled_from([SEQUENTIAL_MAX_ROWS, 0, 3]))
    # The versioned table's history held between batches (the default), never held (0), held
    # until it outgrows 2 versions and narrowed per batch from then on, or held as a window
    # (of at most 4 versions) once it outgrows 8, the lookups older than the window narrowed.
    held_max_rows = draw(st.sampled_from([HELD_MAX_ROWS, 0, 2, 8]))
    return {"config": config, "raw": raw, "cuts": cuts, "sequential_max_rows": sequential_max_rows,
            "held_max_rows": held_max_rows}


@pytest.mark.slow
@spark_examples(8)
@given(case=join_cases())
def test_incremental_equals_reference_for_random_inputs(spark: Any, tmp_path_factory: Any,
                                                        case: dict[str, Any]) -> None:
    assert_same_as_reference(spark, tmp_path_factory.mktemp("stj"), case["config"], case["raw"],
                             case["cuts"], sequential_max_rows=case["sequential_max_rows"],
                             held_max_rows=case["held_max_rows"])


# ---- `python -m joins replay --engine spark` -------------------------------------------------


def stream_table_scenarios() -> list[Path]:
    out = []
    for path in sorted(SCENARIOS.glob("*.json")):
        raw = json.loads(path.read_text())
        if raw.get("operator") == "stream_table_join" and raw.get("expected_error") is None:
            out.append(path)
    return out


def replay_cli(path: Path, engine: str, batch_size: int | None, *, check: bool = False) -> Any:
    return replay(path, engine, batch_size, check=check)


def _cli_scenario(name: str) -> Path:
    path = SCENARIOS / f"{name}.json"
    assert path.exists(), f"scenario {path.name} is not in tests/scenarios"
    return path


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, None], ids=["1", "all"])
def test_replay_cli_spark_equals_reference(spark: Any, batch_size: int | None) -> None:
    """The command's Spark engine prints what the reference engine prints for the same batch
    size (and with --batch-size 1, passes the scenario's own --check); through its entry point
    on the test session (tests/replay_command.py)."""
    path = _cli_scenario("001_late_quarantine")
    spark_run = replay_cli(path, "spark", batch_size, check=batch_size == 1)
    assert spark_run.returncode == 0, spark_run.stderr[-3000:]
    reference_run = replay_cli(path, "reference", batch_size or len(json.loads(path.read_text())["input"]))
    assert reference_run.returncode == 0, reference_run.stderr[-3000:]
    assert spark_run.stdout.splitlines() == reference_run.stdout.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("path", stream_table_scenarios(), ids=lambda p: p.stem)
def test_every_stream_table_scenario_on_spark(spark: Any, path: Path) -> None:
    """Every stream_table_join scenario: the Spark engine in one batch and in batches of 5
    equals the reference engine with the same batches (in-process, one Spark session)."""
    from joins.scenario import load_scenario
    from joins.scenario.runner import prepare

    definition, spec, records = prepare(load_scenario(path))
    for batch_size in (None, 5):
        want_metrics: dict[str, int] = {}
        want = run_reference(definition, spec, records, batch_size or len(records), want_metrics)
        got_metrics: dict[str, int] = {}
        got = spark_replay(spec, records, batch_size, got_metrics)
        assert got == want, f"batch size {batch_size}"
        assert nonzero(got_metrics) == nonzero(want_metrics)


def test_stream_time_from_statistics_only_when_no_record_is_skipped() -> None:
    """A batch's largest eligible ts comes from Delta statistics only when they prove that no
    record is skipped; otherwise the step runs its aggregate (Unknown)."""
    from joins.lake import ChangeStats
    from joins.versioned.prefix import Unknown, max_ts_if_no_nulls

    def stats(**nulls: int) -> ChangeStats:
        return ChangeStats(rows=3, files=1, max={"ts": 17}, nulls=nulls)

    ask = {"ts": "ts", "some_of": ["a", "b"], "all_of": ["k"]}
    assert max_ts_if_no_nulls(stats(ts=0, a=0, b=2, k=0), **ask) == 17
    assert isinstance(max_ts_if_no_nulls(stats(ts=0, a=1, b=2, k=0), **ask), Unknown)  # maybe all-null values
    assert isinstance(max_ts_if_no_nulls(stats(ts=0, a=0, b=0, k=1), **ask), Unknown)  # a null table key
    assert isinstance(max_ts_if_no_nulls(stats(ts=1, a=0, b=0, k=0), **ask), Unknown)  # a null ts
    assert isinstance(max_ts_if_no_nulls(stats(a=0, k=0), **ask), Unknown)  # no null count for ts
    assert isinstance(max_ts_if_no_nulls(None, **ask), Unknown)
    assert max_ts_if_no_nulls(ChangeStats(rows=0, files=0), **ask) is None
    assert max_ts_if_no_nulls(stats(ts=0, k=0), ts="ts", some_of=[], all_of=[]) == 17


@DECIDERS
def test_a_stream_record_without_ts_is_named_not_decided(spark: Any, tmp_path: Path,
                                                         sequential_max_rows: int) -> None:
    """A batch fails on a stream record with a null ts with the engine's error naming the record
    and the field (stream time and lateness are undefined without it), whichever way it is
    decided; nothing of the batch is committed. (The set-wise path used to drop it silently.)"""
    from pyspark.sql import functions as F

    from joins import lake
    from joins.errors import InputRecordError

    spec = spec_of({"join": "left", "table": {"versioned": True, "history_retention_ms": 100},
                    "grace_ms": 2})
    replay = ReplayLake(spark, spec, str(tmp_path))
    replay.land(records_of([{"side": "table", "key": "k", "value": "a", "ts": 0},
                            {"side": "stream", "key": "k", "value": "x", "ts": 10}]), 1)
    rows = lake.read_delta(spark, replay.stream_source)
    lake.write_delta(rows.withColumn("ts", F.lit(None).cast("long"))
                     .withColumn("_seq", F.col("_seq") + 100),
                     replay.stream_source, mode="append", partition_by=["event_date"])
    with pytest.raises(InputRecordError, match="null ts") as caught:
        replay.run(sequential_max_rows=sequential_max_rows)
    assert caught.value.field == "ts" and caught.value.record == {"_seq": 101, "ts": None}
    assert lake.delta_version(replay.paths.output) is None
