"""The history retention a versioned Delta table was built with, stored with the table.

Which puts expired, and which `as_of` reads still answer, depend on the retention: a table
ingested with one retention and joined with another gives answers neither setting stands for.
So the ingest that creates the table records it as the Delta table property
`temporalJoins.historyRetentionMs` in its creating commit, every later ingest must be configured
the same (else a ConfigError naming both values), and readers take it from the table
(`read_history_retention`). A table without the property (created before it existed, or by an
older version that recorded it in a second commit and crashed between the two) adopts the
configured value of its next ingest, and records it.
"""

from __future__ import annotations

from collections.abc import Callable

from joins.errors import ConfigError
from joins.versioned.spark_store import OPERATOR

RETENTION_PROPERTY = "temporalJoins.historyRetentionMs"


def retention_configuration(history_retention_ms: int) -> dict[str, str]:
    """The table properties a versioned table is created with."""
    return {RETENTION_PROPERTY: str(int(history_retention_ms))}


def read_history_retention(path: str) -> int | None:
    """The history retention (ms) stored with the versioned table at `path`; None when there is
    no table yet or the table predates the property (see `check_history_retention`)."""
    from joins.lake import table_properties

    props = table_properties(path)
    if props is None or RETENTION_PROPERTY not in props:
        return None
    raw = props[RETENTION_PROPERTY]
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{OPERATOR}: {path}: table property {RETENTION_PROPERTY} is {raw!r}, "
                          f"not a number of milliseconds") from None


def check_history_retention(path: str, history_retention_ms: int, *,
                            before_commit: Callable[[], None] | None = None) -> None:
    """Refuse an ingest configured with another retention than the table's; record the
    configured one on a table that has none yet (a table created before the property). No table
    yet: nothing to check (the creating commit records it)."""
    from joins.lake import delta_version, set_table_properties

    version = delta_version(path)
    if version is None:
        return
    stored = read_history_retention(path)
    if stored is None:
        if before_commit is not None:
            before_commit()
        set_table_properties(path, retention_configuration(history_retention_ms),
                             expected_version=version)
        return
    if stored != history_retention_ms:
        raise ConfigError(
            f"{OPERATOR}: {path} was built with history_retention_ms = {stored} (table property "
            f"{RETENTION_PROPERTY}) but this ingest is configured with {history_retention_ms}; "
            f"the seed rules of one table need one retention: configure {stored}, or rebuild "
            f"the table from its landing files")
