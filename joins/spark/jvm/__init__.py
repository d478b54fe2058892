"""The engine's JVM side: a few Java classes that Spark loads with the session (sources in src/).

Why Java in a Python project: Spark has no as-of join operator, and no plan built from Spark's own
operators comes near a sort-merge engine on this join (docs/asof_join.md). The broadcast as-of
join (`temporaljoins.AsOfJoin`) probes an in-memory index of the table inside the JVM, on Spark's
row format, so rows never cross into Python.

The Delta writer (`temporaljoins.DeltaTxn`, and `TxnPlugin`, its Spark Connect entry point on
the server) holds delta-spark's transaction in the JVM, where both a classic session and a Connect
server can reach it (joins/lake/txn_write.py).

The classes are compiled here, on first use, against the jars of the installed pyspark and
delta-spark (Maven Central is not needed then, only `javac` from a JDK 17+), into build/ next to
this file; the jar's name carries a hash of the sources and the Spark and Delta versions, so an
edit or an upgrade rebuilds it.
`get_spark` puts the jar on `spark.jars`, which ships it to a cluster's executors too. Where no
`javac` is found, or the session is Spark Connect, the callers use their pure-SQL plans instead;
`unavailable_reason()` says why.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SOURCES = Path(__file__).resolve().parent / "src"
BUILD_DIR = Path(os.environ.get("TJ_JVM_BUILD_DIR", Path(__file__).resolve().parent / "build"))
PROBE_CLASS = "temporaljoins.AsOfJoin"

_lock = threading.Lock()
_jar: Path | None = None
_reason: str | None = None


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def _source_files() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def _fingerprint() -> str:
    import pyspark

    from joins.spark.delta_jars import DELTA_VERSION

    digest = hashlib.sha256(f"{pyspark.__version__} {DELTA_VERSION}".encode())
    for path in _source_files():
        digest.update(path.relative_to(SOURCES).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def jar_path() -> Path | None:
    """The compiled jar, building it when missing or stale; None (see unavailable_reason) when it
    cannot be built here."""
    global _jar, _reason
    with _lock:
        if _jar is not None or _reason is not None:
            return _jar
        try:
            _jar = _build()
        except _Unavailable as exc:
            _reason = str(exc)
            log.warning("temporal-joins JVM helpers unavailable, using pure-SQL plans: %s", exc)
        return _jar


class _Unavailable(Exception):
    pass


def _build() -> Path:
    jar = BUILD_DIR / f"temporal-joins-jvm-{_fingerprint()}.jar"
    if jar.exists():
        return jar
    javac = _javac()
    if javac is None:
        raise _Unavailable("no javac (a JDK 17+) on PATH or in JAVA_HOME")
    jar_tool = str(Path(javac).with_name("jar"))
    if not Path(jar_tool).exists():
        raise _Unavailable(f"no jar tool next to {javac}")
    from joins.errors import ConfigError
    from joins.spark.delta_jars import jar_paths

    try:
        delta = jar_paths()   # DeltaTxn is built on delta-spark's transaction
    except ConfigError as exc:
        raise _Unavailable(str(exc)) from exc
    classpath = os.pathsep.join([str(_pyspark_jars() / "*"), *map(str, delta)])
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD_DIR, prefix="compile-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        compile_cmd = [javac, "-nowarn", "-Xlint:none", "--release", "17", "-d", str(classes),
                       "-cp", classpath, *map(str, _source_files())]
        done = subprocess.run(compile_cmd, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise _Unavailable(f"javac failed: {done.stderr.strip()[-2000:]}")
        staged = Path(tmp) / jar.name
        packed = subprocess.run([jar_tool, "cf", str(staged), "-C", str(classes), "."],
                                capture_output=True, text=True, timeout=120, check=False)
        if packed.returncode != 0:
            raise _Unavailable(f"jar failed: {packed.stderr.strip()[-2000:]}")
        # Atomic: a concurrent process sees either no jar or a whole one.
        os.replace(staged, jar)
    for old in BUILD_DIR.glob("temporal-joins-jvm-*.jar"):
        if old != jar:
            old.unlink(missing_ok=True)
    return jar


def unavailable_reason(spark: SparkSession | None = None) -> str | None:
    """Why the JVM helpers cannot be used (with this session), or None when they can."""
    if jar_path() is None:
        return _reason
    if spark is None:
        return None
    from joins.spark.connect import is_connect

    if is_connect(spark):
        return "the session is Spark Connect (no JVM in this process)"
    if not _loaded(spark):
        return (f"class {PROBE_CLASS} is not on this session's classpath: the session was not built "
                "by joins.spark.get_spark; add the jar from joins.spark.jvm.jar_path() to spark.jars")
    return None


_loaded_in: dict[int, bool] = {}


def _loaded(spark: SparkSession) -> bool:
    """Whether the session's JVM has the classes; asked once per session (a py4j round trip
    per join would show in a sub-second join)."""
    jsession: Any = spark._jsparkSession  # type: ignore[attr-defined]
    key = int(jsession.hashCode())
    if key not in _loaded_in:
        jvm: Any = spark._jvm  # type: ignore[attr-defined]
        try:
            loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
            jvm.java.lang.Class.forName(PROBE_CLASS, False, loader)
            _loaded_in[key] = True
        except Exception:
            _loaded_in[key] = False
    return _loaded_in[key]


def entry(spark: SparkSession) -> Any:
    """The AsOfJoin class, for calls through py4j."""
    from joins.spark.names import jvm_class

    return jvm_class(spark._jvm, "temporaljoins.AsOfJoin")


def shuffled_entry(spark: SparkSession) -> Any:
    """The ShuffledAsOf class (the as-of join's shuffle form), for calls through py4j."""
    from joins.spark.names import jvm_class

    return jvm_class(spark._jvm, "temporaljoins.ShuffledAsOf")
