"""One SparkSession per process, local by default, a cluster master or Spark Connect on request.

A session start costs seconds, so every caller (tests, the replay command, Dagster resources)
shares the one built here. Local mode is tuned for a small machine: all cores, few shuffle
partitions, UTC session time zone, UI off, everything bound to 127.0.0.1.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from joins.spark.context import lean_context, wanted
from joins.spark.delta_jars import DELTA_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

_lock = threading.Lock()
_session: SparkSession | None = None
_settings: SparkSettings | None = None


@dataclass(frozen=True)
class SparkSettings:
    """How to reach Spark.

    master: a Spark master URL (`local[*]`, `spark://host:7077`, `yarn`, `k8s://...`).
    remote: a Spark Connect URL (`sc://host:15002`); when set, `master` is ignored.
    shuffle_partitions: `spark.sql.shuffle.partitions`; small for local mode, raise on a cluster.
    extra_conf: any further Spark settings, applied last.
    """

    master: str = "local[*]"
    remote: str | None = None
    app_name: str = "temporal-joins"
    shuffle_partitions: int = 4
    driver_memory: str = "4g"
    extra_conf: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> SparkSettings:
        """Settings from TJ_SPARK_MASTER / TJ_SPARK_REMOTE / TJ_SHUFFLE_PARTITIONS /
        TJ_DRIVER_MEMORY / TJ_SPARK_CONF (further settings, a JSON object) if set."""
        return cls(
            master=os.environ.get("TJ_SPARK_MASTER", "local[*]"),
            remote=os.environ.get("TJ_SPARK_REMOTE") or None,
            shuffle_partitions=int(os.environ.get("TJ_SHUFFLE_PARTITIONS", "4")),
            driver_memory=os.environ.get("TJ_DRIVER_MEMORY", "4g"),
            extra_conf=spark_conf_from_env(),
        )

    def with_tmpdir(self, path: Path) -> SparkSettings:
        """These settings with the local driver JVM's temporary files (Spark's block manager,
        files and artifacts) under `path`, for a JVM stopped with its process group: its own
        shutdown hooks, which remove them, may not finish, so its owner removes `path`. (Not
        for a Connect client: the JVM is the server's.)"""
        if self.remote is not None:
            return self
        path.mkdir(parents=True, exist_ok=True)
        options = " ".join(filter(None, [self.extra_conf.get(DRIVER_OPTIONS),
                                         f"-Djava.io.tmpdir={path}"]))
        return replace(self, extra_conf={**self.extra_conf, DRIVER_OPTIONS: options})

    def conf(self) -> dict[str, str]:
        conf = {
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.ansi.enabled": "true",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            # Delta readers expect microsecond timestamps; Spark's default INT96 is deprecated.
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
            # The engine reads Delta tables by their files' paths (from the log): above 32
            # paths Spark would list them in a Spark job of its own (0.2 s of a micro-batch's
            # table lookup); the driver stats them in milliseconds.
            "spark.sql.sources.parallelPartitionDiscovery.threshold": "4096",
            # A micro-batch joins frames it cached or checkpointed, which Spark cannot size
            # before they are computed: it takes them for huge and adds a Bloom-filter subquery
            # (one more job over the other side) to joins of a few thousand rows. Measured on
            # the interval join's 10k-row batch: its writes 0.1-0.2 s faster without.
            "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
        }
        if self.remote is None:
            # The demo's and the replay command's reports are their output: Spark's progress
            # bars would interleave with them (a cluster's UI shows progress anyway).
            conf["spark.ui.showConsoleProgress"] = "false"
            # PySpark 4 records the Python call site of every DataFrame call for its error
            # messages: several JVM round trips per call, about a third of a small
            # micro-batch's plan-building time.
            # The engine names the record and field in its own errors instead. (A static
            # setting: a Connect client cannot set it, and its calls make no round trip.)
            conf["spark.python.sql.dataFrameDebugging.enabled"] = "false"
            # Spark keeps the 100 classes it compiled last (static). One foreign-key batch
            # alone generates about 90 distinct ones, so at 100 each batch compiled again what
            # the batch before it had: 60-90 compilations a batch at 1M x 100k, 6 with room for
            # 2,000 (the ones left inline the batch's id). A class is a few KB of bytecode (2.5
            # KB on average in a foreign-key batch, 13 KB at most): 2,000 hold about 5 MB.
            conf["spark.sql.codegen.cache.maxEntries"] = "2000"
        if self.remote is None:
            # delta-spark's SQL and catalog (a Connect server sets them itself: static settings)
            conf.update(DELTA_CONF)
        if self.remote is None and self.master.startswith("local"):
            conf.update({
                "spark.ui.enabled": "false",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.memory": self.driver_memory,
                "spark.default.parallelism": str(max(2, os.cpu_count() or 2)),
                "spark.sql.adaptive.enabled": "true",
                # One JVM is both driver and executor, so no broadcast block is ever fetched
                # over a network: compressing the blocks buys only a smaller copy in the
                # driver's block store, at a cost in time. Building the as-of index of 1M
                # versions (its broadcast 40 MB): 0.40-0.43 s against 0.47-0.51 s.
                "spark.broadcast.compress": "false",
            })
            if os.environ.get("PYSPARK_PYTHON", sys.executable) == sys.executable:
                # The daemon that forks Python workers, with their imports done once
                # (joins/spark/python_daemon.py): 1.2-1.4 s of CPU per worker otherwise. Only
                # for this interpreter, which has the engine: another may not, and a daemon
                # that cannot start fails every Python task, a user's own included.
                conf["spark.python.daemon.module"] = "joins.spark.python_daemon"
        conf.update(self.extra_conf)
        if self.remote is None:
            # A session's driver JVM logs errors only from its start (the file says why); the
            # caller's own driver options come after, so a -D of theirs wins.
            conf[DRIVER_OPTIONS] = " ".join(filter(None, [
                f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}", self.extra_conf.get(DRIVER_OPTIONS)]))
        return conf


def spark_conf_from_env(variable: str = "TJ_SPARK_CONF") -> dict[str, str]:
    """Further Spark settings from `variable`, a JSON object of `spark.*` keys (for example a
    catalog: `{"spark.sql.catalogImplementation": "hive"}`); ConfigError names what is wrong."""
    import json

    from joins.errors import ConfigError

    text = os.environ.get(variable, "").strip()
    if not text:
        return {}
    example = '{"spark.sql.catalogImplementation": "hive"}'
    try:
        conf = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{variable}: not JSON ({exc.msg} at character {exc.pos}); give a JSON "
                          f"object of Spark settings, e.g. {example}") from None
    if not isinstance(conf, dict):
        raise ConfigError(f"{variable}: give a JSON object of Spark settings, e.g. {example}; "
                          f"got {type(conf).__name__}")
    bad = [k for k in conf if not k.startswith("spark.")]
    if bad:
        raise ConfigError(f"{variable}: Spark settings start with 'spark.', got {bad}")
    nested = [k for k, v in conf.items() if isinstance(v, (dict, list)) or v is None]
    if nested:
        raise ConfigError(f"{variable}: a setting's value is a string, number or boolean; "
                          f"{nested} are not")
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()}


def session_jars() -> list[Path]:
    """The jars every session the project starts loads: delta-spark's (pinned, fetched by setup:
    joins/spark/delta_jars.py) and the engine's JVM classes (the broadcast as-of join; without a
    JDK the callers fall back to pure-SQL plans)."""
    from joins.spark.delta_jars import jar_paths
    from joins.spark.jvm import jar_path

    engine = jar_path()
    return jar_paths() + ([engine] if engine is not None else [])


# Hadoop's local file system forks `chmod` and `readlink` without its native library (pip's
# pyspark has none): a dozen processes per Delta commit on a local table.
# temporaljoins.LocalFileSystem (joins/spark/jvm) does the same through java.nio.
LOCAL_FS_CONF = {
    "spark.hadoop.fs.file.impl": "temporaljoins.LocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "temporaljoins.LocalFs",
}


def local_fs_conf(master: str, jars: list[Path], conf: Mapping[str, str]) -> dict[str, str]:
    """The shell-free local file system for a local master, where the engine's jar is built
    (else, or where `conf` names another file system, Hadoop's own).

    spark-submit opens the jars it is given through this very file system, before spark.jars
    reaches any class loader: the class goes on the JVM's own class path, and with it the jars
    its neighbours in the engine's jar need (delta-spark's). A cluster's executors would need
    the jar at one path on every machine, so a cluster keeps Hadoop's."""
    from joins.spark.jvm import jar_path

    if not master.startswith("local") or jar_path() is None \
            or any(k in conf for k in LOCAL_FS_CONF):
        return {}
    path = os.pathsep.join([*filter(None, [conf.get("spark.driver.extraClassPath")]),
                            *map(str, jars)])
    return {**LOCAL_FS_CONF, "spark.driver.extraClassPath": path}


def get_spark(settings: SparkSettings | None = None) -> SparkSession:
    """The process-wide session, built on first use. Later calls with other settings get the
    same session (a JVM hosts one); pass settings on the first call."""
    global _session, _settings
    with _lock:
        if _session is not None:
            return _session
        settings = settings or SparkSettings.from_env()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if settings.remote is None and settings.master.startswith("local"):
            # Python workers must run this interpreter (the project's venv, with pyarrow and
            # numpy), not whatever `python3` is first on PATH.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(settings.app_name)
        if settings.remote is not None:
            builder = builder.remote(settings.remote)
        else:
            builder = builder.master(settings.master)
        conf = settings.conf()
        if settings.remote is None:
            # spark.jars also ships them to a cluster's executors.
            jars = [conf["spark.jars"]] if conf.get("spark.jars") else []
            own = session_jars()
            conf["spark.jars"] = ",".join(jars + [str(p) for p in own])
            conf.update(local_fs_conf(settings.master, own, conf))
        for key, value in conf.items():
            builder = builder.config(key, value)
        with lean_context() if settings.remote is None and wanted() else nullcontext():
            session = builder.getOrCreate()
        if settings.remote is None:
            from pyspark import SparkContext

            from joins.spark.names import cache_jvm_names
            from joins.spark.py4j_calls import install_chunked_lists, keep_columns_by_name
            from joins.spark.py4j_release import install_bulk_release

            session.sparkContext.setLogLevel("ERROR")
            cache_jvm_names(session)
            install_chunked_lists()
            keep_columns_by_name(SparkContext._jvm)
            install_bulk_release(session)
            trim_hadoop_defaults(session)
        _session, _settings = session, settings
        return session


def trim_hadoop_defaults(spark: SparkSession) -> list[str]:
    """Drop Hadoop's YARN and MapReduce defaults from the JVM's configurations: 720 of their
    1,150 entries, which every file-reading or -writing job serialized and every task read back
    (`temporaljoins.HadoopDefaults` says why; TJ_HADOOP_DEFAULTS=keep keeps them). Returns the
    resources dropped; none without the engine's JVM classes."""
    from joins.spark.jvm import unavailable_reason
    from joins.spark.names import jvm_class

    if unavailable_reason(spark) is not None:
        return []
    jvm = spark._jvm
    assert jvm is not None
    return [str(name) for name in jvm_class(jvm, "temporaljoins.HadoopDefaults").trim()]


def stop_spark() -> None:
    global _session, _settings
    with _lock:
        if _session is not None:
            _session.stop()
        _session, _settings = None, None
