"""The project's code generation for a while, in the suite's session, which compiles no code
(tiny data; tests/conftest.py): a bug that only generated code shows passes the whole suite
otherwise (docs/architecture.md, "The test session compiles no code")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def generated_code(spark: Any, mode: str = "FALLBACK") -> Iterator[None]:
    """Whole-stage and expression code generation (`mode`: Spark's factory mode) until exit."""
    settings = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": mode}
    before = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
