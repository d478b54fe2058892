"""Which engine functions build a micro-batch's frames: Dataset calls counted and timed by caller.

Catalyst analyses a classic Dataset's plan at each transformation (`select`, `withColumn`,
`join`, ...), on the driver, while the engine builds a batch's frames; that analysis, not the
rows, is most of a small batch's cost (docs/testing.md, "What is left"). A redesign that builds
an operator's step as one plan starts where these calls are: this counts them, with their wall
time, by the engine function (under `joins/`) that made them. A call made inside another (a
`filter` inside `where`) counts once, as the outer one.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Transformations (each analysed when called) and the calls that plan a frame without a job.
METHODS = ("select", "selectExpr", "withColumn", "withColumns", "withColumnRenamed",
           "withColumnsRenamed", "drop", "where", "filter", "join", "crossJoin", "union",
           "unionByName", "distinct", "dropDuplicates", "alias", "hint", "observe", "limit",
           "orderBy", "sort", "repartition", "coalesce", "toDF", "localCheckpoint", "persist",
           "unpersist")
GROUPED = ("agg", "count", "max", "min", "sum")
ENGINE = str(Path(__file__).resolve().parents[1] / "joins") + "/"
OTHER = "(outside the engine)"


class Tally:
    """Calls and seconds by (engine function, Dataset method)."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.seconds: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()   # the runtime stages a batch's writes from threads

    def add(self, where: str, method: str, seconds: float) -> None:
        with self._lock:
            self.calls[where, method] += 1
            self.seconds[where, method] += seconds

    def by_function(self, top: int, per: int = 1) -> list[dict[str, Any]]:
        """The `top` functions by time: calls and ms (divided by `per`, e.g. batches), with
        their three most frequent methods."""
        calls: Counter[str] = Counter()
        seconds: Counter[str] = Counter()
        methods: dict[str, Counter[str]] = {}
        for (where, method), n in self.calls.items():
            calls[where] += n
            seconds[where] += self.seconds[where, method]
            methods.setdefault(where, Counter())[method] = n
        rows = []
        for where, s in seconds.most_common(top):
            rows.append({"function": where, "calls": round(calls[where] / per, 1),
                         "ms": round(s * 1000 / per, 1),
                         "methods": ", ".join(f"{m} {n / per:.1f}"
                                              for m, n in methods[where].most_common(3))})
        return rows

    def totals(self, per: int = 1) -> dict[str, float]:
        return {"calls": round(sum(self.calls.values()) / per, 1),
                "ms": round(sum(self.seconds.values()) * 1000 / per, 1)}


def caller(frame: Any) -> str:
    """`path:function` of the innermost engine frame on the stack, relative to the repository."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(ENGINE):
            return f"joins/{name[len(ENGINE):]}:{frame.f_code.co_name}"
        frame = frame.f_back
    return OTHER


@contextmanager
def counting() -> Iterator[Tally]:
    """Every classic DataFrame transformation and grouped aggregate made meanwhile, tallied."""
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.group import GroupedData

    tally = Tally()
    inside = threading.local()   # per thread: a call made inside a counted one is not counted
    patched: list[tuple[type, str, Any]] = []

    def wrap(cls: type, method: str) -> None:
        original = cls.__dict__.get(method)
        if original is None:
            return

        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(inside, "on", False):
                return original(self, *args, **kwargs)
            inside.on = True
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                inside.on = False
                tally.add(caller(sys._getframe(1)), method, time.perf_counter() - start)

        patched.append((cls, method, original))
        setattr(cls, method, counted)

    for m in METHODS:
        wrap(DataFrame, m)
    for m in GROUPED:
        wrap(GroupedData, m)
    try:
        yield tally
    finally:
        for cls, method, original in patched:
            setattr(cls, method, original)
