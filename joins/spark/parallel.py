"""Independent Spark actions of one micro-batch, run at the same time.

A batch's table writes are independent Spark jobs over a few rows each; side by side they cost
little more than one. The calls run in PySpark's `InheritableThread`s, so their jobs keep the
caller's job group (the batch's phase in the Spark UI) or, on Spark Connect, its tags.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")


def run_all(spark: SparkSession, calls: Sequence[Callable[[], T]]) -> list[T]:
    """Each call's result, in order. Every call has finished when this returns or raises, and
    the first failure in call order is raised: a call that leaves something to clean up on
    another's failure records it where the caller finds it (the results are lost)."""
    from pyspark.util import InheritableThread

    if len(calls) <= 1:
        return [call() for call in calls]
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:  # handed to the caller's thread below
            errors[i] = exc

    threads = [InheritableThread(run, args=(i,), session=spark) for i in range(1, len(calls))]
    for thread in threads:
        thread.start()
    try:
        run(0)
    finally:
        for thread in threads:
            thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results
