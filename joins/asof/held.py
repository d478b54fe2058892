"""The version index held between micro-batches: a versioned table's history kept in the driver
(`temporaljoins.IndexCache`, joins/spark/jvm) so that a batch reads only the versions the table
gained since the batch before, not its whole history again.

A Kafka Streams task keeps its versioned store on local disk and reads the changelog topic only
to restore it; here the Delta table is the changelog and the driver's memory the store. What is
held is one table (its Delta table id) at one version, per holder (one join's table side), in two
layers: a base, broadcast once, and the delta of versions gained since, broadcast per batch and
merged into a new base when it outgrows an eighth of it (`temporaljoins.Lookup` answers from
both as from one index). A batch's cost thus follows what the table gained, not its size.

A batch that starts at or after the held version merges the versions since in (one small Spark
job, none when the table gained nothing); anything else (the first batch in a process, another
table at the same path, a table rewritten meanwhile, a holder that ran ahead) reads the table
again (a history of more than `first_read_max_rows` versions only from the holder's second
batch in the process on): all of it, if it has at most `max_rows` versions; else its window
(`joins.asof.window`: the versions from some ts on, plus each key's last one before it, at most
`max_rows / 2`), and lookups older than the window's start are left to the caller; else None,
and the caller joins another way. All holders of a process together keep at most 4M versions
(`IndexCache.TOTAL_MAX_ROWS`; the least recently used give way, and read their table again at
their next batch). Answers never depend on what is held: the held index and a fresh one are the
same index.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins.asof.errors import HashCollision, duplicate_version, jvm_template, null_ts
from joins.asof.index import (
    bounds,
    built,
    index_layout,
    index_unusable,
    prepared_schema,
    prepared_table,
    probe,
)
from joins.asof.plan import AsOfPlan
from joins.asof.window import window_frame, window_start
from joins.spark.exprs import ident

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

# Above this many versions the history is not held whole (its window may be): the driver holds
# about 70 bytes per version plus its values (2M versions with one double retain 185 MiB,
# the broadcast's compressed copy included), and a new base is broadcast to every
# executor when the delta outgrows an eighth of it. Per batch, the cost follows the delta.
HELD_MAX_ROWS = 4_000_000
# ... and above this many bytes of values (wide rows): the driver keeps them, and a copy for the
# broadcast. A history found larger is not held again (`_NOT_HELD`); its batches narrow instead.
HELD_MAX_BYTES = 256 << 20
# A history of more versions than this is read at a holder's second batch in the process, not
# its first (which returns None: the caller narrows, as a one-off batch should): reading 10M
# versions into a window takes 5-14 s here, a batch that narrows them about 1 s, so the read
# pays only for a process that runs batches on (a replay, the warm run worker, a stream).
FIRST_READ_MAX_ROWS = 1_000_000
_SEEN: set[tuple[str, str]] = set()
# (Holder, table id) pairs whose whole history, or even whose window, turned out not to fit:
# not read again to find out.
_NOT_WHOLE: set[tuple[str, str]] = set()
_NOT_HELD: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class HeldTable:
    """One versioned table as a holder reads it in one batch. Its frames (the history, the
    changes) have the columns of `schema`, in that order."""

    holder: str                                     # one held history per holder
    table_id: str                                   # the Delta table's id
    version: int                                    # the table version this batch reads
    rows: int | None                                # its rows at `version` (None: not known)
    schema: StructType
    history: Callable[[], DataFrame]                # the whole table at `version`
    changes_after: Callable[[int], DataFrame | None]  # rows after a version up to `version`;
    #                                                 None when the table was rewritten since
    sequence: tuple[str, ...]                       # orders two puts of one (key, ts): later wins
    max_rows: int = HELD_MAX_ROWS
    max_bytes: int = HELD_MAX_BYTES
    first_read_max_rows: int = FIRST_READ_MAX_ROWS

    def key(self, plan: AsOfPlan) -> str:
        """The holder and the layout: another join of the table, or the same table read with
        other columns, holds its own history."""
        shape = "|".join([self.schema.json(), plan.table_key, plan.table_ts, str(plan.tombstone_col),
                          ",".join(plan.value_cols), str(plan.valid_from_col), ",".join(self.sequence)])
        return f"{self.holder}#{hashlib.sha256(shape.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class HeldJoin:
    """The stream rows the held index answers, joined, and those it leaves to the caller."""

    joined: DataFrame
    rest: DataFrame | None  # rows older than the held window's start (None: there are none)
    window_from: int | None  # the held window's start (None: the whole history is held)
    index: Any               # the JVM's IndexCache.Held

    @property
    def held_rows(self) -> int:
        """Versions held, in both layers (a JVM call: not asked on a batch's path)."""
        return int(self.index.rows())


def held_index_join(plan: AsOfPlan, stream: DataFrame, held: HeldTable,
                    min_stream_ts: int | None = None) -> HeldJoin | None:
    """`stream` joined through the held index of the table, or None where holding does not
    apply (the index cannot run, or nothing usable is held and not even a window of the table
    fits). `min_stream_ts`, when known, is the smallest ts of `stream` (in its units): when the
    held window covers it, no row is left over and no filter runs."""
    from joins.spark.names import jvm_class

    if index_unusable(plan, stream, held.schema) is not None:
        return None
    spark = stream.sparkSession
    cache = jvm_class(spark._jvm, "temporaljoins.IndexCache")
    key = held.key(plan)
    at = int(cache.version(key, held.table_id))
    frame: DataFrame | None = None
    start, window = -1, _WHOLE
    if at == held.version:
        start = at  # the table gained nothing: no Spark job
    elif 0 <= at < held.version:
        changes = held.changes_after(at)
        if changes is not None:
            frame, start = changes, at
    if start < 0:
        if (key, held.table_id) in _NOT_HELD:
            return None
        large = held.rows is None or held.rows > held.first_read_max_rows
        if large and (key, held.table_id) not in _SEEN:
            _SEEN.add((key, held.table_id))
            return None
        whole = held.rows is not None and held.rows <= held.max_rows
        if whole and (key, held.table_id) not in _NOT_WHOLE:
            frame = held.history()
        else:
            found = _window(plan, held, key)
            if found is None:
                return None
            window, frame = found
    if frame is not None and frame.columns != held.schema.fieldNames():
        raise ValueError(f"held table {held.holder}: a frame has columns {frame.columns}, the "
                         f"held schema {held.schema.fieldNames()}")
    schema = prepared_schema(plan, held.schema)
    layout = index_layout(plan, schema.fieldNames())
    sequence = [schema.fieldNames().index(c) for c in held.sequence]
    jframe = None if frame is None else prepared_table(plan, frame)._jdf
    jspark: Any = spark._jsparkSession  # type: ignore[attr-defined]
    try:
        index = built(lambda: cache.index(
            jspark, jspark.parseDataType(schema.json()), key, held.table_id, held.version, jframe,
            start, window, held.max_rows, held.max_bytes, *layout.args(), sequence,
            jvm_template(null_ts(plan, "table")), jvm_template(duplicate_version(plan)),
            layout.key_check_field, *bounds(plan)))
    except HashCollision:
        return None  # the per-batch path meets it too, and falls back to a SQL plan
    except Exception as exc:
        if "INDEX_CACHE_MISS" in str(exc):
            return None  # another thread of this process moved the held version meanwhile
        if "as-of index:" in str(exc):
            _NOT_HELD.add((key, held.table_id))  # over the 2 GiB of values an index can hold
            return None
        raise
    window = int(index.windowFrom())
    if start < 0 and not index.kept():
        # Read anew and already too large to keep: the next batch would read it again. A
        # whole history may still fit as a window; a window does not fit at all.
        (_NOT_WHOLE if window == _WHOLE else _NOT_HELD).add((key, held.table_id))
    rest = None
    if window != _WHOLE and (min_stream_ts is None or min_stream_ts < window):
        ts = ident(plan.stream_ts)
        # A null ts is left over too: the caller's join names it as the error it is.
        rest = stream.where(f"NOT coalesce({ts} >= {window}, false)")
        stream = stream.where(f"{ts} >= {window}")
    return HeldJoin(probe(plan, stream, index, layout, held=True), rest,
                    None if window == _WHOLE else window, index)


_WHOLE = -(2 ** 63)  # the window start of a history held whole (Long.MIN_VALUE)


def _window(plan: AsOfPlan, held: HeldTable, key: str) -> tuple[int, DataFrame] | None:
    """(start, frame) of the table's window within half of `max_rows` (the other half is room to
    grow), or None: the ts is not an integer, or not even one version per key fits."""
    if plan.ts_kind != "integral":
        return None
    history = held.history()
    start = window_start(history, key=plan.table_key, ts=plan.table_ts, budget=held.max_rows // 2,
                         rows=held.rows)
    if start is None:
        _NOT_HELD.add((key, held.table_id))
        return None
    return start, window_frame(history, key=plan.table_key, ts=plan.table_ts,
                               sequence=held.sequence, start=start)
