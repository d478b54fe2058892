"""Delta table properties (`metaData.configuration`): read them, and record new ones on a table
that exists (a table being created gets its properties from `write_delta(configuration=...)`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError

from joins.lake.errors import ConcurrentCommitError, LakeError
from joins.lake.location import TableLocation
from joins.lake.table import open_snapshot


def table_properties(path: str | os.PathLike[str] | TableLocation) -> dict[str, str] | None:
    """The table's properties; None when there is no table."""
    snap = open_snapshot(path, missing_ok=True)
    return None if snap is None else snap.configuration


def set_table_properties(path: str | os.PathLike[str] | TableLocation, properties: Mapping[str, str],
                         *, expected_version: int) -> int:
    """Record `properties` in one metadata commit that must be version `expected_version + 1`
    (ConcurrentCommitError when another writer committed meanwhile). Returns the new version."""
    loc = TableLocation.of(path)
    snap = open_snapshot(loc, shared=False)   # committed through
    assert snap is not None
    if snap.version != expected_version:
        raise ConcurrentCommitError(
            f"{loc}: expected the table at version {expected_version} but it is at "
            f"{snap.version}: another writer committed meanwhile; no property was recorded")
    try:
        snap.table.alter.set_table_properties(
            dict(properties), raise_if_not_exists=False,
            commit_properties=CommitProperties(max_commit_retries=0))
    except CommitFailedError as exc:
        raise ConcurrentCommitError(f"{loc}: another writer committed meanwhile; no property "
                                    f"was recorded ({exc})") from exc
    except DeltaError as exc:
        raise LakeError(f"{loc}: cannot record table properties {sorted(properties)}: {exc}") \
            from exc
    return DeltaTable(loc.delta_uri).version()
