"""delta-spark's jars: pinned, fetched once from Maven Central, checked, put on every session.

pip installs delta-spark's Python API but not its jars; delta's own helper
(`configure_spark_with_delta_pip`) has Ivy resolve them at every session start, which needs the
network each time and checks nothing. Here the project's setup (`./tj setup`, which calls
`main` below) downloads the two jars below once into the environment
(`<venv>/share/temporal-joins/jars`), each checked against its pinned SHA-256, and every session
the project starts (local, a standalone cluster's executors through `spark.jars`, the Spark
Connect server through `--jars`) loads them.

Only delta-spark and delta-storage: delta-spark's other Maven dependencies (the Delta kernel,
Unity Catalog's client, Hadoop's client, Parquet, Jackson, Scala) serve catalog-managed tables
or are already in pyspark's own jars, at the versions Spark was built with.

A machine without network: put the jars in a folder and point `TJ_SPARK_JARS` at it (or at the
jar files, comma-separated); the error below names the files and where they come from.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from joins.errors import ConfigError

DELTA_VERSION = "4.4.0"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"

# The session settings delta-spark needs: its SQL (DELETE/UPDATE/MERGE, time travel) and its
# catalog. Delta replays a table's log in a Spark job of 50 partitions by default; a micro-batch's
# tables have small logs (a checkpoint every 100 commits: joins.lake.write.NEW_TABLE_PROPERTIES),
# where 50 tasks cost more than the replay.
# Each commit's version checksum lists the table's files up to a threshold (50 by default); above
# it, a partition replacement's file list is a replay of the log, Spark jobs: on a table of 1.4k
# files a one-day replacement took 0.82 s, 0.21 s with the list in the checksum, appends alike
# (0.33 s) with a checksum of 470 KB. Above 5,000 files the checksum would pass ~3 MB per commit.
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.allFilesInCrc.thresholdNumFiles": "5000",
}


@dataclass(frozen=True)
class Jar:
    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def url(self) -> str:
        return (f"{MAVEN_CENTRAL}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/"
                f"{self.file_name}")


JARS = (
    Jar("io.delta", "delta-spark_2.13", DELTA_VERSION,
        "27d4fd8b1f879535c573ed1c718177d6a27f24d3e626ba02e216369725721ead"),
    Jar("io.delta", "delta-storage", DELTA_VERSION,
        "c46735481fa8e326b0957be02b4420cbcab4b325bb08009b7f2045a95133f1cc"),
)


def jars_dir() -> Path:
    """Where setup puts the jars: inside the Python environment, so a new venv fetches anew."""
    return Path(os.environ.get("TJ_JARS_DIR", Path(sys.prefix) / "share" / "temporal-joins" / "jars"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _from_env(value: str) -> list[Path]:
    paths: list[Path] = []
    for part in filter(None, (p.strip() for p in value.split(","))):
        path = Path(part)
        if path.is_dir():
            found = {jar.file_name: path / jar.file_name for jar in JARS}
            missing = [name for name, p in found.items() if not p.exists()]
            if missing:
                raise ConfigError(f"TJ_SPARK_JARS={value}: {path} lacks {', '.join(missing)}")
            paths.extend(found.values())
        elif path.exists():
            paths.append(path)
        else:
            raise ConfigError(f"TJ_SPARK_JARS={value}: {path} does not exist")
    return paths


def jar_paths() -> list[Path]:
    """The delta-spark jars every session loads; a ConfigError naming what is missing and how to
    provide it when setup has not fetched them (never a download here: sessions start offline)."""
    override = os.environ.get("TJ_SPARK_JARS")
    if override:
        return _from_env(override)
    folder = jars_dir()
    paths = [folder / jar.file_name for jar in JARS]
    missing = [jar for jar, path in zip(JARS, paths, strict=True) if not path.exists()]
    if missing:
        raise ConfigError(
            f"delta-spark's jars are not in {folder}: {', '.join(j.file_name for j in missing)}. "
            "Run `./tj setup` (it downloads them once from Maven Central), or download "
            + ", ".join(j.url for j in missing)
            + " into a folder and set TJ_SPARK_JARS to it.")
    return paths


def fetch(folder: Path | None = None, *, quiet: bool = False) -> list[Path]:
    """Download the pinned jars that are missing or damaged, each checked before it is kept."""
    folder = folder or jars_dir()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for jar in JARS:
        path = folder / jar.file_name
        if path.exists() and _sha256(path) == jar.sha256:
            paths.append(path)
            continue
        if not quiet:
            print(f"== fetching {jar.url}", file=sys.stderr)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".part-", delete=False) as tmp:
            staged = Path(tmp.name)
            try:
                with urllib.request.urlopen(jar.url, timeout=120) as response:
                    for block in iter(lambda: response.read(1 << 20), b""):
                        tmp.write(block)
            except OSError as exc:
                staged.unlink(missing_ok=True)
                raise ConfigError(f"cannot download {jar.url}: {exc}. Without network, put the jar "
                                  "in a folder and set TJ_SPARK_JARS to it.") from exc
        got = _sha256(staged)
        if got != jar.sha256:
            staged.unlink(missing_ok=True)
            raise ConfigError(f"{jar.url}: SHA-256 {got}, expected {jar.sha256} (pinned in "
                              f"{__name__}); the download is not the pinned jar")
        os.replace(staged, path)   # a concurrent setup sees no jar or a whole, checked one
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="joins.spark.delta_jars",
                                     description="Fetch delta-spark's pinned jars (once).")
    parser.add_argument("--dir", type=Path, default=None, help=f"default: {jars_dir()}")
    args = parser.parse_args(argv)
    try:
        for path in fetch(args.dir):
            print(path)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
