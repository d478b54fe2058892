"""A source whose data lands as a user's Delta table (`format: delta`, `landing` naming the
table): its commits play the part of landing files. Each version is "landed" once committed and
taken by exactly one ingest batch, recorded in the batch log like a file (`v<version>`, zero-padded
so that name order is version order); a batch reads the contiguous versions it planned, through
`joins.landing.reader.read_delta_changes` (the change data feed, or the appends)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.ingest.source import IngestSource
    from joins.landing.reader import LandingBatch

_PREFIX = "v"
_DIGITS = 20


def version_name(version: int) -> str:
    return f"{_PREFIX}{version:0{_DIGITS}d}"


def version_of(name: str) -> int:
    if not (name.startswith(_PREFIX) and name[1:].isdigit()):
        raise ConfigError(f"{name!r} is not a Delta version's name in a batch log (v<20 digits>)")
    return int(name[1:])


def landed_versions(table: str) -> list[str]:
    """The committed versions of `table`, as batch log names; none while it does not exist."""
    from joins.lake import delta_version

    latest = delta_version(table)
    return [] if latest is None else [version_name(v) for v in range(latest + 1)]


def up_to_metadata_change(table: str, names: Sequence[str]) -> list[str]:
    """The leading versions of `names` that one read can take: a batch ends before a commit
    that changes the table's metadata (its columns, or turning the change data feed on or off),
    which then starts the next batch. A planned batch is re-run as planned after a crash, so a
    range Delta would refuse must never be planned."""
    from joins.lake.location import TableLocation
    from joins.lake.log import commit_actions

    loc = TableLocation.of(table)
    for i, name in enumerate(names):
        if i > 0 and any("metaData" in a for a in commit_actions(loc, version_of(name))):
            return list(names[:i])
    return list(names)


def batch_reader(spark: SparkSession, source: IngestSource, names: Sequence[str]
                 ) -> tuple[str, Callable[[], LandingBatch]]:
    """(how the batch is named in reports, the read of its versions) for a planned batch."""
    from joins.landing.reader import read_delta_changes

    versions = sorted(version_of(n) for n in names)
    first, last = versions[0], versions[-1]
    if versions != list(range(first, last + 1)):
        raise ConfigError(f"{source.name}: an ingest batch must take contiguous versions of "
                          f"{source.landing}, got {versions}")
    label = f"{source.landing}@v{first}" + (f"..v{last}" if last != first else "")
    return label, lambda: read_delta_changes(spark, source.landing, first - 1, last, source.spec)
