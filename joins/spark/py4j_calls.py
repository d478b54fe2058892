"""Fewer py4j round trips for the two things nearly every DataFrame call sends: lists of
columns, and columns by name.

- **Lists.** py4j turns a Python list argument into a Java list with one round trip per
  element (an `ArrayList`, then `add` after `add`). PySpark passes such a list with every
  `select`, `join`, `unionByName` or `groupBy` of N columns (`PythonUtils.toSeq`). Here a list
  of two or more plain elements travels ten at a time (`java.util.List.of`, up to ten
  arguments in one call), appended to the `ArrayList` a chunk per round trip.
- **Columns by name.** `F.col("x")` asks the JVM for a new `Column` every time, and PySpark
  does so for every name it is given (`df.select("a", "b")`). An unresolved column by name is
  an immutable value that binds to nothing until a plan resolves it, so one per name serves
  every call; `_ColumnsByName` keeps them (bounded).

Measured on warm single-record micro-batches, the settings alternated in one process, six
rounds each: the interval join (`003_join_full`, 1,689 py4j calls a batch, 384 of them `add`
and 364 `col`) 874 ms a batch against 969 ms (each change alone took 3 to 6 % off), the
foreign-key join (`004_lhs_steps_inner`) 768 against 803 ms.

Both are installed once per driver process by `joins.spark.session`, for classic sessions
(Spark Connect sends no py4j calls).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from py4j import protocol
from py4j.java_collections import JavaArray
from py4j.java_gateway import JavaClass, JavaObject

CHUNK = 10  # java.util.List.of takes up to ten arguments without varargs
MAX_NAMES = 10_000


class ChunkedListConverter:
    """py4j's list conversion with ten elements a round trip instead of one."""

    def __init__(self) -> None:
        # py4j asks the JVM what `List.of` is on every attribute access: once per gateway here.
        self._list_of: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def can_convert(self, obj: Any) -> bool:
        # Only lists and tuples; any other iterable (a set, a generator) goes to py4j's own
        # converter, which is registered after this one.
        return type(obj) in (list, tuple)

    def convert(self, obj: Any, gateway_client: Any) -> JavaObject:
        items = list(obj)
        array_list = JavaClass("java.util.ArrayList", gateway_client)
        if len(items) < 2 or not all(_plain(x) for x in items):
            out = array_list()
            for x in items:
                out.add(x)
            return out
        of = self._list_of.get(gateway_client)
        if of is None:
            of = self._list_of[gateway_client] = JavaClass("java.util.List", gateway_client).of
        out = array_list(of(*items[:CHUNK]))
        for start in range(CHUNK, len(items), CHUNK):
            chunk = items[start:start + CHUNK]
            # One element would match List.of(E...) too if it were an array: add it alone.
            if len(chunk) == 1:
                out.add(chunk[0])
            else:
                out.addAll(of(*chunk))
        return out


def _plain(x: Any) -> bool:
    """An element List.of takes as one element: not null (List.of refuses nulls), not bytes
    and not a Java array (either could be taken for the varargs array itself)."""
    return x is not None and not isinstance(x, (bytes, bytearray, JavaArray))


_converter = ChunkedListConverter()


def install_chunked_lists() -> None:
    """Put the chunked conversion first in py4j's input converters (once per process)."""
    if not any(c is _converter for c in protocol.INPUT_CONVERTER):
        protocol.register_input_converter(_converter, prepend=True)


class _ColumnsByName:
    """`functions.col` with one JVM Column kept per name (an unresolved attribute: immutable,
    bound by whichever plan uses it). Other arguments, and names past MAX_NAMES, go to the JVM
    each time."""

    def __init__(self, col: Callable[[Any], JavaObject]) -> None:
        self._col = col
        self._by_name: dict[str, JavaObject] = {}

    def __call__(self, name: Any) -> JavaObject:
        if type(name) is not str:
            return self._col(name)
        column = self._by_name.get(name)
        if column is None:
            column = self._col(name)
            if len(self._by_name) < MAX_NAMES:
                self._by_name[name] = column
        return column


def keep_columns_by_name(jvm: Any) -> None:
    """Route `functions.col` through `_ColumnsByName`. `jvm` is the caching view of the JVM
    (joins/spark/names.py), where PySpark reaches `functions` under two names: the short one
    (a name in `df.select("a")`) and the qualified one (`F.col`)."""
    columns: _ColumnsByName | None = None
    for name in ("functions", "org.apache.spark.sql.functions"):
        functions = getattr(jvm, name)
        if not isinstance(functions.col, _ColumnsByName):
            columns = columns or _ColumnsByName(functions.col)
            functions.remember("col", columns)
