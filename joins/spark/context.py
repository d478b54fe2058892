"""The JVM SparkContext under a classic session: the engine's `temporaljoins.LeanSparkContext`,
which cleans each kind of lambda closure once instead of on every RDD call and job (its
javadoc says why; 8.6 % of the session JVM's samples on single-record micro-batches).

PySpark builds the JVM context in `SparkContext._initialize_context`; `lean_context` routes
that one call to the engine's class while the session is built, and leaves Spark's own where
the class is not on the driver's class path or `TJ_SPARK_CONTEXT=spark` is set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ENV = "TJ_SPARK_CONTEXT"
LEAN_CLASS = "LeanSparkContext"


def wanted() -> bool:
    """Whether sessions this process builds should run on the engine's context."""
    return os.environ.get(ENV, "lean").strip().lower() != "spark"


@contextmanager
def lean_context() -> Iterator[None]:
    """While it is open, a new PySpark SparkContext is built on the engine's JVM context."""
    from pyspark import SparkContext

    original = SparkContext._initialize_context

    def initialize(self: Any, jconf: Any) -> Any:
        jvm = self._jvm
        cls = getattr(jvm.temporaljoins, LEAN_CLASS)
        if not callable(cls):  # py4j's JavaPackage: the class is not on the class path
            return original(self, jconf)
        return jvm.JavaSparkContext(cls(jconf))

    SparkContext._initialize_context = initialize  # type: ignore[method-assign]
    try:
        yield
    finally:
        SparkContext._initialize_context = original  # type: ignore[method-assign]


def is_lean(spark: Any) -> bool:
    """Whether a classic session runs on the engine's context."""
    return str(spark.sparkContext._jsc.sc().getClass().getSimpleName()) == LEAN_CLASS
