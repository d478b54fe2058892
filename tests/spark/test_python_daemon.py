"""The local session's Python daemon (joins/spark/python_daemon.py): its workers start with the
engine's modules imported, and a module it cannot import does not stop it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from joins.spark import SparkSettings, python_daemon

pytestmark = pytest.mark.spark


def test_every_preloaded_module_imports() -> None:
    assert python_daemon.preload() == []


def test_a_module_that_fails_to_import_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_daemon, "PRELOADED", ("pyarrow", "joins.no_such_module"))
    assert python_daemon.preload() == ["joins.no_such_module"]


DAEMON = "spark.python.daemon.module"


def test_a_local_session_on_this_interpreter_takes_the_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert SparkSettings().conf()[DAEMON] == "joins.spark.python_daemon"
    # A cluster's executors, or another interpreter, may not have the engine: PySpark's own.
    assert DAEMON not in SparkSettings(master="spark://127.0.0.1:7077").conf()
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    assert DAEMON not in SparkSettings().conf()
    # A setting of the user's wins.
    assert SparkSettings(extra_conf={DAEMON: "pyspark.daemon"}).conf()[DAEMON] == "pyspark.daemon"


def _what_the_worker_had(batches: Iterator[Any]) -> Iterator[Any]:
    # Runs in a forked Python worker: what its parent is and what it had imported before this
    # task (nothing in this function or this test module imports the engine's kernel).
    import os
    import sys

    import pyarrow as pa

    cmdline = f"/proc/{os.getppid()}/cmdline"   # Linux; elsewhere only `preloaded` is checked
    parent = None
    if os.path.exists(cmdline):
        with open(cmdline, "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
    preloaded = "joins.operators.stream_table_join.sequential" in sys.modules
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pylist([{"parent": parent, "preloaded": preloaded}])


def test_a_local_sessions_workers_are_forked_with_the_engine_imported(spark: Any) -> None:
    if spark.sparkContext.master.split("[")[0] != "local":
        # A cluster keeps PySpark's own daemon (its executors may lack the engine).
        assert spark.sparkContext.getConf().get(DAEMON, None) is None
        return
    assert spark.sparkContext.getConf().get(DAEMON) == "joins.spark.python_daemon"
    rows = spark.range(1).mapInArrow(_what_the_worker_had, "parent string, preloaded boolean").collect()
    assert rows and all(r.preloaded for r in rows)
    assert all(r.parent is None or "joins.spark.python_daemon" in r.parent for r in rows)
