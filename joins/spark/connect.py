"""Spark Connect: how to tell a Connect session apart.

A Connect client (`sc://`) holds no JVM: what goes through py4j (`sparkContext`, `_jdf`, `_jvm`)
does not exist there, and a query is analysed on the server when it runs, not when it is built.
The engine's code paths that depend on either have a Connect form or a documented fallback
(docs/cluster.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")

