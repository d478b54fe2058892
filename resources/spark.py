"""Dagster resource for the shared SparkSession (local, a cluster master, or Spark Connect)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field

from joins.errors import ConfigError
from joins.spark import SparkSettings, get_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkResource(ConfigurableResource):
    """The process-wide SparkSession built by `joins.spark.get_spark`.

    The session is built on the first `get_session()` call (a start costs seconds, and runs
    that touch no Spark asset should not pay it). One JVM hosts one session: a second resource
    with other settings in the same process gets the first session.
    """

    master: str = Field(default="local[*]",
                        description="Spark master URL: local[*], spark://host:7077, yarn, k8s://...")
    remote: str | None = Field(default=None,
                               description="Spark Connect URL (sc://host:15002); overrides master")
    shuffle_partitions: int = Field(default=4, description="spark.sql.shuffle.partitions")
    driver_memory: str = Field(default="4g", description="spark.driver.memory (local mode)")
    app_name: str = Field(default="temporal-joins", description="Spark application name")
    extra_conf: dict[str, str] = Field(default_factory=dict,
                                       description="further Spark settings, applied last")

    def settings(self) -> SparkSettings:
        """The validated settings; ConfigError names the offending key."""
        if self.remote is not None and not self.remote.startswith("sc://"):
            raise ConfigError(f"spark.remote: a Spark Connect URL starts with sc://, got "
                              f"{self.remote!r}")
        if self.remote is None and not self.master.strip():
            raise ConfigError("spark.master: must not be empty")
        if self.shuffle_partitions < 1:
            raise ConfigError(f"spark.shuffle_partitions: must be >= 1, got "
                              f"{self.shuffle_partitions}")
        for key in self.extra_conf:
            if not key.startswith("spark."):
                raise ConfigError(f"spark.extra_conf.{key}: Spark settings start with 'spark.'")
        return SparkSettings(master=self.master, remote=self.remote, app_name=self.app_name,
                             shuffle_partitions=self.shuffle_partitions,
                             driver_memory=self.driver_memory, extra_conf=dict(self.extra_conf))

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # Fail a misconfigured run at start, before any asset computes.
        self.settings()

    def get_session(self) -> SparkSession:
        return get_spark(self.settings())

    def session_for(self, context: Any) -> SparkSession:
        """The session, with a log line in the step's log saying which one (its Spark application
        and process): a run's steps share one session, and this is how it shows."""
        session = self.get_session()
        context.log.info(f"{SESSION_LOG_PREFIX} {spark_identity(session)}")
        return session


SESSION_LOG_PREFIX = "Spark session:"


def spark_identity(session: SparkSession) -> str:
    """Which SparkSession this is: its application id (one per SparkContext) and process."""
    try:
        app = session.sparkContext.applicationId
    except Exception:  # Spark Connect has no SparkContext: its session id names it
        connect_id = getattr(session, "session_id", None)
        app = f"connect-{connect_id}" if connect_id else "unknown"
    return f"application {app}, process {os.getpid()}, session object {id(session):#x}"
