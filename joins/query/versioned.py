"""Questions a user asks a versioned table (KIP-960/968's interactive queries, and one more):

- `get`: the value of a key valid at an event time, by `VersionedStore.get`'s rules (the version
  with the largest valid-from at or before the time; a tombstone reads absent; a time older than
  stream time minus history retention reads absent unless the key's latest version answers it,
  since the latest version never expires);
- `history`: every version of a key the table holds, each with its validity interval and
  whether it is beyond history retention (readable only as the key's latest version);
- both `at_commit`: what the table knew at one of its Delta versions (time travel).

Each answer says why when there is no value: a key the table never held, a time before the
key's first version, a delete, a time beyond history retention. A commit the table does not
have is a `QueryError` naming the versions it has.

The reads are Spark jobs over the table filtered to one key; only that key's versions reach
the driver (what the answer is made of).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from joins.core.human import duration, iso_time
from joins.errors import JoinsError
from joins.versioned.spark_store import (
    TOMBSTONE,
    TS,
    VALID_FROM,
    VALID_TO,
    VersionedDeltaLayout,
    current_versions,
    expiry_bound,
    snapshot_as_of,
    stream_time_of,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class QueryError(JoinsError):
    """A question the table cannot answer (no such table, commit or key column)."""


@dataclass(frozen=True)
class VersionedTableRef:
    """A versioned Delta table and how to read it."""

    name: str
    path: str
    layout: VersionedDeltaLayout
    key_types: dict[str, str] = field(default_factory=dict)   # key column -> declared type


@dataclass(frozen=True)
class Version:
    """One version of a key: its value (None: a tombstone), valid from `valid_from` until
    `valid_to` (None: still valid); `beyond_retention`: older than stream time minus history
    retention and not the key's latest, so no read reaches it any more."""

    value: dict[str, Any] | None
    valid_from: int
    valid_to: int | None
    beyond_retention: bool

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "valid_from": iso_time(self.valid_from),
                "valid_to": None if self.valid_to is None else iso_time(self.valid_to),
                "deleted": self.value is None, "beyond_retention": self.beyond_retention}


@dataclass(frozen=True)
class Answer:
    """`get`'s answer: the value valid at `as_of` (None: none, `reason` says why)."""

    table: str
    key: dict[str, Any]
    as_of: int
    commit: int | None
    value: dict[str, Any] | None
    valid_from: int | None
    valid_to: int | None
    reason: str

    def text(self) -> str:
        where = f"{self.table} {_key_text(self.key)} as of {iso_time(self.as_of)}" + (
            f" (commit {self.commit})" if self.commit is not None else "")
        if self.value is None:
            return f"{where}: no value: {self.reason}"
        until = "still valid" if self.valid_to is None else f"until {iso_time(self.valid_to)}"
        values = ", ".join(f"{k}={v}" for k, v in self.value.items())
        return f"{where}: {values} (valid from {iso_time(self.valid_from or 0)}, {until})"

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "key": self.key, "as_of": iso_time(self.as_of),
                "commit": self.commit, "value": self.value,
                "valid_from": None if self.valid_from is None else iso_time(self.valid_from),
                "valid_to": None if self.valid_to is None else iso_time(self.valid_to),
                "reason": self.reason}


def _key_text(key: dict[str, Any]) -> str:
    return ",".join(str(v) for v in key.values())


def require_stored(table: VersionedTableRef, commit: int | None) -> None:
    """QueryError unless the table has been stored and has commit `commit` (None: any). Read
    from the Delta log with delta-rs: a question about a table not there yet fails before a
    Spark session starts."""
    from joins import lake

    if not lake.table_exists(table.path):
        raise QueryError(f"table {table.name!r}: nothing stored yet at {table.path} (no ingest "
                         f"has committed)")
    latest = lake.delta_version(table.path)
    if commit is not None and (commit < 0 or latest is None or commit > latest):
        raise QueryError(f"table {table.name!r} has commits 0..{latest}; there is no commit {commit}")


def versions_at(spark: SparkSession, table: VersionedTableRef, commit: int | None) -> DataFrame:
    """The table's versions at Delta version `commit` (None: the latest), or QueryError naming the
    commits it has. `get_in` / `history_in` answer from such a frame (a caller that narrows it,
    such as the Spark replay's view of what a batch knew before an op, asks the same code)."""
    from joins import lake

    require_stored(table, commit)
    try:
        return lake.read_delta(spark, table.path, version=commit)
    except Exception as exc:   # a version whose files or log were vacuumed away
        raise QueryError(f"table {table.name!r}: commit {commit} cannot be read any more "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); its files "
                         f"were removed (vacuum) or its log was cleaned up") from None


def _for_key(versions: DataFrame, layout: VersionedDeltaLayout, key: dict[str, Any]) -> DataFrame:
    from pyspark.sql import functions as F

    missing = [c for c in layout.key_columns if c not in key]
    if missing:
        raise QueryError(f"the key needs a value for {', '.join(missing)}")
    cond = None
    for column in layout.key_columns:
        this = F.col(column) == F.lit(key[column])
        cond = this if cond is None else cond & this
    return versions.where(cond)


def history(spark: SparkSession, table: VersionedTableRef, key: dict[str, Any], *,
            start: int | None = None, end: int | None = None,
            commit: int | None = None) -> list[Version]:
    """Every version of `key` (oldest first) valid at some time in [start, end]."""
    return history_in(versions_at(spark, table, commit), table, key, start=start, end=end)


def history_in(versions: DataFrame, table: VersionedTableRef, key: dict[str, Any], *,
               start: int | None = None, end: int | None = None) -> list[Version]:
    """`history` over a versions frame of `table` (`versions_at`)."""
    held = _held(versions, stream_time_of(versions), table.layout, key)
    return [v for v in held if (end is None or v.valid_from <= end)
            and (start is None or v.valid_to is None or v.valid_to > start)]


def _held(versions: DataFrame, stream_time: int | None, layout: VersionedDeltaLayout,
          key: dict[str, Any]) -> list[Version]:
    rows = current_versions(_for_key(versions, layout, key), layout).orderBy(TS).collect()
    bound = expiry_bound(stream_time, layout.history_retention_ms)
    out: list[Version] = []
    for i, row in enumerate(rows):
        valid_to = rows[i + 1][TS] if i + 1 < len(rows) else None
        value = None if row[TOMBSTONE] else {c: row[c] for c in layout.value_columns}
        beyond = bound is not None and valid_to is not None and valid_to <= bound
        out.append(Version(value, row[TS], valid_to, beyond))
    return out


def get(spark: SparkSession, table: VersionedTableRef, key: dict[str, Any], as_of: int, *,
        commit: int | None = None) -> Answer:
    """The value of `key` valid at event time `as_of`, and why there is none when there is none."""
    return get_in(versions_at(spark, table, commit), table, key, as_of, commit=commit)


def get_in(versions: DataFrame, table: VersionedTableRef, key: dict[str, Any], as_of: int, *,
           commit: int | None = None) -> Answer:
    """`get` over a versions frame of `table` (`versions_at`); `commit` only labels the answer."""
    stream_time = stream_time_of(versions)
    layout = table.layout
    found = snapshot_as_of(_for_key(versions, layout, key), layout, as_of, stream_time).collect()
    if found:
        row = found[0]
        return Answer(table.name, key, as_of, commit, {c: row[c] for c in layout.value_columns},
                      row[VALID_FROM], row[VALID_TO], "found")
    held = _held(versions, stream_time, layout, key)
    return Answer(table.name, key, as_of, commit, None, None, None,
                  _why_none(held, key, as_of, stream_time, layout.history_retention_ms))


def _why_none(held: list[Version], key: dict[str, Any], as_of: int, stream_time: int | None,
              retention_ms: int) -> str:
    if not held:
        return f"the table never held key {_key_text(key)} (no version was ever stored for it)"
    first = held[0]
    if as_of < first.valid_from:
        return f"its first version is valid from {iso_time(first.valid_from)}"
    bound = expiry_bound(stream_time, retention_ms)
    if bound is not None and as_of < bound:
        return (f"{iso_time(as_of)} is beyond history retention: the table keeps history back to "
                f"{iso_time(bound)} (stream time {iso_time(stream_time or 0)} minus "
                f"{duration(retention_ms)}); older times read only a key's latest version")
    at = next(v for v in reversed(held) if v.valid_from <= as_of)
    return f"deleted at {iso_time(at.valid_from)} (a tombstone)"
