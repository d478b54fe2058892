"""PySpark's Python daemon with the modules its workers need imported once, before it forks them.

Spark starts one daemon per executor (`python -m pyspark.daemon`), which forks a worker for each
Python task and keeps idle workers about a minute. Every forked worker then imports
`pyspark.worker`, pyarrow and pandas for its Arrow stream and the engine's module whose function
it runs: 1.2-1.4 s of CPU, most of what a worker does for the engine's small Python tasks (a CSV
file's records, the grace buffer's Python kernel, a long-line scan). Imported here, a fork
inherits them. A local session whose workers run its own interpreter runs this daemon
(`spark.python.daemon.module`, set by `joins.spark.session`); a cluster, or another interpreter,
keeps PySpark's own, as the engine may not be installed where the daemon starts.

Nothing here may stop the daemon from serving: a module that fails to import is left to the
worker, which then reports the error with its task.
"""

from __future__ import annotations

import importlib

# The modules a worker imports for the engine's Python tasks (tests/spark/test_python_daemon.py
# checks that each still exists).
PRELOADED = (
    "pyspark.worker",
    "pyarrow",
    "pandas",
    "pyspark.sql.pandas.serializers",
    "joins.landing.csv_records",
    "joins.landing.long_lines",
    "joins.landing.parquet_values",
    "joins.operators.stream_table_join.sequential",
)


def preload() -> list[str]:
    """Import PRELOADED; returns the modules that could not be imported."""
    failed = []
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # the worker reports it with the task that needs it
            failed.append(name)
    return failed


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
