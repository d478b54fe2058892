"""A small batch's grace decision, record at a time in one Spark task (seed 001, KIP-923).

`grace.py` decides a batch set-wise and distributed: right for a large batch (a catch-up after
an outage, days of replay), but every step of it is a Spark stage of its own (block maxima,
prefix windows, the eviction window, broadcasts), and for a micro-batch of a few thousand
records those stages' fixed costs are most of the batch's time. A Kafka Streams task decides
its partition's records one at a time, in one thread; this does the same in one Spark task:
the batch's new records and the buffer it starts from are read by one task (a coalesce, no
shuffle) and decided in arrival order: in the JVM (`temporaljoins.GraceDecision`, the rows
never leave it) where the engine's JVM classes run, else in a Python worker by the reference
processor's own `GraceBuffer` (`decide_rows`; Spark Connect). Both are held equal to the
reference by the tests. A small batch costs one stage; the JVM's kernel is the default because
the Python worker's Arrow round trip, not the decision, is most of a large batch's task.

The result is `Decision.decided` with every row the task saw: each new record (its CLASS,
P_BEFORE, FATE, EMIT_SEQ, LATE, as `grace.py` gives them) and each buffered record (CLASS
null; FATE join when the batch evicts it, keep when it stays). The kept rows make the buffer
after the batch (`Decision.kept_buffer` is None), so the buffer is read once, here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from joins.errors import InputRecordError
from joins.operators.stream_table_join.columns import BATCH_ID, EMIT_SEQ, LATE, TABLE_KEY
from joins.operators.stream_table_join.grace import (
    CLASS,
    FATE,
    JOIN_FATE,
    JOINED,
    KEEP_FATE,
    LATE_CLASS,
    PUT,
    QUARANTINE_FATE,
    SKIPPED_NULL_KEY,
    SKIPPED_NULL_VALUE,
    Decision,
)
from joins.operators.stream_table_join.report import MAX_ELIGIBLE
from joins.versioned.prefix import P_BEFORE, max_opt

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructField, StructType

    from joins.operators.stream_table_join.spec import StreamTableJoinSpec

# A batch whose new records and buffer hold at most this many rows is decided in one task. One
# Python loop over the rows costs about a microsecond per record on this machine's cores; the
# set-wise path's fixed cost is about half a second (bench/incremental_step.py times both).
SEQUENTIAL_MAX_ROWS = 200_000

Kernel = Literal["auto", "jvm", "python"]

_BUFFERED = "_buffered"
# What the task's failure on a record without a ts carries, for `null_ts_error` to find.
_NULL_TS_MARKER = "stream-table-null-ts:"
_NULL_TS = re.compile(re.escape(_NULL_TS_MARKER) + r"(\d+)")


@dataclass(frozen=True)
class _Arrival:
    ts: int
    i: int     # the record's arrival index (its seq): unique, as the buffer needs
    row: int   # its place in the task's rows


def fits(new_rows: int | None, buffered: int, limit: int = SEQUENTIAL_MAX_ROWS) -> bool:
    """Whether a batch of `new_rows` (None: not known before reading it) and a buffer of
    `buffered` records is decided in one task."""
    return new_rows is not None and new_rows + buffered <= limit


def decide_in_one_task(new: DataFrame, buffer: DataFrame | None, spec: StreamTableJoinSpec, *,
                       stream_cols: list[str], value_cols: list[str], ts: str, seq: str,
                       stream_time_before: int | None, batch_id: int | None = None,
                       kernel: Kernel = "auto") -> DataFrame:
    """The decided frame (see the module docstring) of `new` and `buffer` (both hold
    `stream_cols` plus TABLE_KEY), each row stamped with BATCH_ID = `batch_id` when given.
    Lazy: the caller materializes it once.

    kernel: "jvm" decides in the JVM (`temporaljoins.GraceDecision`: the rows never cross into
    Python), "python" in a Python worker with the reference's `GraceBuffer` (`decide_rows`);
    "auto" takes the JVM's where it can run (integer ts and seq, the engine's JVM classes
    loaded: not over Spark Connect)."""
    from joins.spark.exprs import ident

    columns = [*stream_cols, TABLE_KEY]
    carried = [ident(c) for c in columns]
    late_fate = {"join": JOIN_FATE, "quarantine": QUARANTINE_FATE}.get(spec.late)
    if kernel == "jvm" or (kernel == "auto" and _jvm_can_decide(new, ts, seq)):
        # The JVM brings both sides into one task itself (no union, no coalesce, no tagging
        # projection: each a Dataset call, an analysis on the driver).
        def carried_only(frame: DataFrame) -> DataFrame:
            return frame if frame.columns == columns else frame.selectExpr(*carried)

        return _decide_in_jvm(carried_only(new), None if buffer is None else carried_only(buffer),
                              spec, value_cols=value_cols, ts=ts, seq=seq, late_fate=late_fate,
                              stream_time_before=stream_time_before, batch_id=batch_id)
    rows = new.selectExpr(*carried, f"false AS {_BUFFERED}")
    if buffer is not None:
        rows = rows.unionByName(buffer.selectExpr(*carried, f"true AS {_BUFFERED}"))
    task = _kernel(grace_ms=spec.grace_ms, late_fate=late_fate, inner=spec.join == "inner",
                   value_cols=tuple(value_cols), ts=ts, seq=seq,
                   stream_time_before=stream_time_before, batch_id=batch_id)
    return rows.coalesce(1).mapInArrow(task, _decided_schema(rows.schema.fields,
                                                             stamped=batch_id is not None))


def _decided_schema(fields: list[StructField], *, stamped: bool) -> StructType:
    from pyspark.sql import types as T

    return T.StructType([*(f for f in fields if f.name != _BUFFERED),
                         T.StructField(CLASS, T.StringType()),
                         T.StructField(P_BEFORE, T.LongType()),
                         T.StructField(FATE, T.StringType()),
                         T.StructField(EMIT_SEQ, T.LongType()),
                         T.StructField(LATE, T.BooleanType(), False),
                         *([T.StructField(BATCH_ID, T.LongType(), False)] if stamped else [])])


def _jvm_can_decide(new: DataFrame, ts: str, seq: str) -> bool:
    from pyspark.sql import types as T

    from joins.spark import jvm

    schema = new.schema
    return (isinstance(schema[ts].dataType, T.IntegralType)
            and isinstance(schema[seq].dataType, T.IntegralType)
            and jvm.unavailable_reason(new.sparkSession) is None)


def _decide_in_jvm(new: DataFrame, buffer: DataFrame | None, spec: StreamTableJoinSpec, *,
                   value_cols: list[str], ts: str, seq: str, late_fate: str | None,
                   stream_time_before: int | None, batch_id: int | None) -> DataFrame:
    """`decide_rows`'s decision made by `temporaljoins.GraceDecision`, which takes the class and
    fate names from here so that they are written once. `new` and `buffer`: the same columns."""
    from pyspark.sql import DataFrame as _DataFrame

    from joins.spark.names import jvm_class

    spark = new.sparkSession
    cols = new.columns
    jdf = jvm_class(spark._jvm, "temporaljoins.GraceDecision").decide(
        new._jdf, None if buffer is None else buffer._jdf, cols.index(ts), cols.index(seq),
        cols.index(TABLE_KEY), [cols.index(c) for c in value_cols], spec.grace_ms is not None,
        spec.grace_ms or 0, late_fate, spec.join == "inner", stream_time_before is not None,
        stream_time_before or 0, batch_id is not None, batch_id or 0,
        [CLASS, P_BEFORE, FATE, EMIT_SEQ, LATE, BATCH_ID],
        [SKIPPED_NULL_VALUE, SKIPPED_NULL_KEY, LATE_CLASS, PUT, JOINED], [JOIN_FATE, KEEP_FATE],
        _NULL_TS_MARKER)
    return _DataFrame(jdf, spark)


def null_ts_error(exc: BaseException, *, ts: str, seq: str, source: str) -> InputRecordError | None:
    """The InputRecordError of a task that met a stream record without a ts, or None."""
    match = _NULL_TS.search(str(exc))
    return None if match is None else null_ts_record(int(match.group(1)), ts=ts, seq=seq,
                                                      source=source)


def null_ts_record(arrival: int, *, ts: str, seq: str, source: str) -> InputRecordError:
    """The error for the stream record `arrival` (its `seq`) that has no ts: both ways of
    deciding a batch refuse it (stream time and lateness are undefined without it)."""
    return InputRecordError(f"the stream record with {seq} = {arrival} has a null {ts}; "
                            f"a stream record needs its event time", field=ts, source=source,
                            record={seq: arrival, ts: None})


def sequential_decision(decided: DataFrame | None, metrics: dict[str, Any],
                        spec: StreamTableJoinSpec, *, stream_cols: list[str], ts: str,
                        stream_time_before: int | None, stamped: bool = False) -> Decision:
    """The Decision of a materialized `decide_in_one_task` frame (`stamped`: given a batch
    id) and its metrics; `decided` None: a batch without new records, which decides nothing
    (its stream time stays, its metrics are `report.no_records_counts`)."""
    top = metrics.get(MAX_ELIGIBLE)
    after = max_opt(stream_time_before, None if top is None else int(top))
    bound = None if spec.grace_ms is None or after is None else after - spec.grace_ms
    return Decision(decided, None, tuple(stream_cols), ts, spec.grace_ms, spec.late, after, bound,
                    stamped)


def _kernel(*, grace_ms: int | None, late_fate: str | None, inner: bool,
            value_cols: tuple[str, ...], ts: str, seq: str, stream_time_before: int | None,
            batch_id: int | None) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The task's function (shipped to the executor: plain values only in its closure)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        received = list(batches)
        if not received:
            return
        table = pa.Table.from_batches(received)
        decided = decide_rows(table, grace_ms=grace_ms, late_fate=late_fate, inner=inner,
                              value_cols=value_cols, ts=ts, seq=seq,
                              stream_time_before=stream_time_before)
        if batch_id is not None:
            decided = decided.append_column(BATCH_ID, pa.array([batch_id] * decided.num_rows,
                                                                pa.int64()))
        yield from decided.to_batches()

    return run


def decide_rows(table: pa.Table, *, grace_ms: int | None, late_fate: str | None, inner: bool,
                value_cols: tuple[str, ...], ts: str, seq: str,
                stream_time_before: int | None) -> pa.Table:
    """`table` (the carried columns and _BUFFERED) decided: the carried columns plus CLASS,
    P_BEFORE, FATE, EMIT_SEQ, LATE, in the same row order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from joins.operators.stream_table_join.reference import GraceBuffer

    n = table.num_rows
    ts_of: list[int] = table.column(ts).to_pylist()
    seq_of: list[int] = table.column(seq).to_pylist()
    buffered: list[bool] = table.column(_BUFFERED).to_pylist()
    key_null: list[bool] = pc.is_null(table.column(TABLE_KEY)).to_pylist()
    value_null = [False] * n
    if value_cols:
        nulls = pc.is_null(table.column(value_cols[0]))
        for c in value_cols[1:]:
            nulls = pc.and_(nulls, pc.is_null(table.column(c)))
        value_null = nulls.to_pylist()

    cls: list[str | None] = [None] * n
    p_before: list[int | None] = [None] * n
    fate: list[str | None] = [None] * n
    emit = list(seq_of)
    late = [False] * n
    grace: GraceBuffer[_Arrival] | None = None
    if grace_ms is not None:
        grace = GraceBuffer(grace_ms)
        grace.stream_time = stream_time_before
        for r in range(n):
            if buffered[r]:
                grace.put(_Arrival(ts_of[r], seq_of[r], r), None)
                fate[r] = KEEP_FATE
    stream_time = stream_time_before
    for r in range(n):
        if ts_of[r] is None and not (value_null[r] or (inner and key_null[r])):
            # Stream time and lateness are undefined without a ts (the reference's record model
            # requires one): the step names the record instead of guessing.
            raise ValueError(f"{_NULL_TS_MARKER}{seq_of[r]} (a stream record has no ts)")
    for r in sorted((r for r in range(n) if not buffered[r]), key=seq_of.__getitem__):
        p_before[r] = stream_time
        if value_null[r]:
            cls[r] = SKIPPED_NULL_VALUE
        elif inner and key_null[r]:
            cls[r] = SKIPPED_NULL_KEY
        elif grace is None:
            cls[r], fate[r] = JOINED, JOIN_FATE
            stream_time = max_opt(stream_time, ts_of[r])
        elif grace.is_late(ts_of[r]):
            cls[r], fate[r], late[r] = LATE_CLASS, late_fate, True
        else:
            cls[r], fate[r] = PUT, KEEP_FATE
            grace.put(_Arrival(ts_of[r], seq_of[r], r), None)
            stream_time = grace.stream_time
            for evicted, _key in grace.evict():
                fate[evicted.row], emit[evicted.row] = JOIN_FATE, seq_of[r]
    return table.drop_columns([_BUFFERED]).append_column(CLASS, pa.array(cls, pa.string())) \
        .append_column(P_BEFORE, pa.array(p_before, pa.int64())) \
        .append_column(FATE, pa.array(fate, pa.string())) \
        .append_column(EMIT_SEQ, pa.array(emit, pa.int64())) \
        .append_column(LATE, pa.array(late, pa.bool_()))
