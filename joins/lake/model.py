"""Value types of the lake API: application transactions and commit outcomes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Distinct partition values of a write's files: ((column, Delta partition value), ...) each.
Partitions = tuple[tuple[tuple[str, str | None], ...], ...]


@dataclass(frozen=True)
class AppTxn:
    """An application transaction: (app id, version) recorded atomically with a commit.

    A writer that replays a batch passes the same pair; the commit is skipped when the table
    already holds this app id at this version or later. That makes a retried micro-batch
    exactly-once without any state outside the table.
    """

    app_id: str
    version: int

    def __post_init__(self) -> None:
        if not isinstance(self.app_id, str) or not self.app_id:
            raise ValueError("AppTxn.app_id must be a non-empty string")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise ValueError(f"AppTxn.version must be an integer >= 0, got {self.version!r}")


@dataclass(frozen=True)
class CommitInfo:
    """What `write_delta` did.

    version: the table version of the commit (None when skipped).
    skipped: the app transaction was already committed; nothing was written.
    files / rows: data files added and the rows in them.
    partitions: the distinct partition values of the added files ((column, Delta partition
        string) pairs), e.g. the event days a write touched, known without reading a row.
    """

    version: int | None
    skipped: bool
    files: int
    rows: int
    # Not part of equality: two commits of the same rows are the same outcome.
    partitions: Partitions = field(default=(), compare=False)

    def partition_values(self, column: str) -> tuple[str, ...]:
        """The sorted distinct values of one partition column among the added files."""
        return tuple(sorted({dict(p).get(column) for p in self.partitions} - {None}))  # type: ignore[arg-type]


def partitions_of(values: Iterable[Mapping[str, str | None]]) -> Partitions:
    """CommitInfo.partitions of files with these partition values: distinct, sorted (a null
    value sorts as an empty string)."""
    distinct = {tuple(sorted(v.items())) for v in values}
    return tuple(sorted(distinct, key=lambda p: [(k, v or "") for k, v in p]))


@dataclass(frozen=True)
class FileEntry:
    """One data file of a table: path relative to the table root (decoded, as on storage) or an
    absolute URI, and its typed partition values (None = null partition)."""

    path: str
    partition_values: dict[str, Any] = field(default_factory=dict)
    size: int | None = None
    num_records: int | None = None
