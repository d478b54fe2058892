"""temporal-joins engine: join semantics of Kafka Streams versioned tables and Hazelcast's
bounded stream-to-stream join, as a pure-Python reference and as Spark operators over Delta Lake.

This package never imports Dagster; the orchestration layers (resources/, assets/, pipelines/)
build on it.
"""

__version__ = "0.1.0"
