"""What the ingest engine needs to know about a source, and what one batch did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from joins.errors import ConfigError
from joins.landing.spec import LandingSpec

SourceKind = Literal["table", "stream", "changelog"]
OPERATOR = "ingest"
# How long a crashed ingest keeps its source's lease before another run may take it over.
DEFAULT_LEASE_TTL_S = 300.0


@dataclass(frozen=True)
class IngestSource:
    """One source: its landing folder and file schema, and where its tables live.

    - `kind`: `table` (a versioned table: seed rules, expired puts quarantined; needs
      `history_retention_ms`), `stream` (an append-only events table) or `changelog` (an
      events table that keeps every update's `tombstone` flag: a table whose versioning the
      operator applies, e.g. either side of a table-table join);
    - `table`: the versioned table / the events table; `quarantine`: rows (and whole files)
      not stored, with the reason; `manifest`: the source's batch log, which landing files
      each batch took (`joins.ingest.log`);
    - `lease`: the writer lease that lets one ingest of the source run at a time;
    - `catalog_table`: a Delta source named in Spark's catalog; each run resolves it to its
      location (`landing`) and checks it against `catalog_record` (`joins.ingest.catalog`).
    """

    name: str
    kind: SourceKind
    landing: str
    spec: LandingSpec
    table: str
    quarantine: str
    manifest: str
    lease: str
    history_retention_ms: int | None = None
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    catalog_table: str | None = None
    catalog_record: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError(f"{OPERATOR}: a source needs a non-empty name")
        if self.kind not in ("table", "stream", "changelog"):
            raise ConfigError(f"{OPERATOR} {self.name!r}: kind must be 'table', 'stream' or "
                              f"'changelog', got {self.kind!r}")
        if not isinstance(self.spec, LandingSpec):
            raise ConfigError(f"{OPERATOR} {self.name!r}: spec must be a LandingSpec")
        if (self.kind == "table") != (self.history_retention_ms is not None):
            raise ConfigError(f"{OPERATOR} {self.name!r}: history_retention_ms is required for a "
                              f"table source and meaningless for a stream")
        if (self.catalog_table is None) != (self.catalog_record is None):
            raise ConfigError(f"{OPERATOR} {self.name!r}: a catalog table needs its record's "
                              f"path (catalog_record), and only a catalog table has one")
        if self.history_retention_ms is not None and self.history_retention_ms < 0:
            raise ConfigError(f"{OPERATOR} {self.name!r}: history_retention_ms must be >= 0, got "
                              f"{self.history_retention_ms}")


@dataclass(frozen=True)
class IngestSummary:
    """One ingest batch of a source. rows_in = stored + expired + quarantined, where a file
    quarantined whole (`bad_files`) counts as one."""

    source: str
    batch_id: int
    files: tuple[str, ...]
    rows_in: int
    stored: int
    expired: int
    quarantined: int
    bad_files: tuple[str, ...]
    stream_time: int | None
    delta_version: int | None
    skipped: bool
