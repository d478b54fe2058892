"""Independent Spark actions of one micro-batch, run at the same time.

A small batch's Spark jobs wait mostly on the driver (planning, scheduling, a few tasks of a
few rows each), not on the cores: two such jobs side by side take little longer than one. The
calls run in PySpark's `InheritableThread`s, so their jobs keep the caller's job group (the
batch's phase in the Spark UI) or, on Spark Connect, its tags.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")


class Pending(Generic[T]):
    """A call running in its own thread since `start`; `result()` waits for it."""

    def __init__(self, spark: SparkSession, call: Callable[[], T]) -> None:
        from pyspark.util import InheritableThread

        self._value: Any = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = call()
            except BaseException as exc:  # handed to the thread that asks for the result
                self._error = exc

        self._thread = InheritableThread(run, session=spark)
        self._thread.start()

    def wait(self) -> None:
        """Until the call has finished, whatever its outcome (before giving up on it)."""
        self._thread.join()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[no-any-return]


def start(spark: SparkSession, call: Callable[[], T]) -> Pending[T]:
    return Pending(spark, call)


def run_all(spark: SparkSession, calls: Sequence[Callable[[], T]]) -> list[T]:
    """Each call's result, in order. Every call has finished when this returns or raises, and
    the first failure in call order is raised: a call that leaves something to clean up on
    another's failure records it where the caller finds it (the results are lost)."""
    if len(calls) <= 1:
        return [call() for call in calls]
    pending = [start(spark, call) for call in calls[1:]]
    try:
        first = calls[0]()
    finally:
        for p in pending:
            p.wait()
    return [first, *(p.result() for p in pending)]
