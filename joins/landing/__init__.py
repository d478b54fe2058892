"""Landing files (JSON-lines, CSV, Parquet) of a changelog: read with a declared schema,
validated row by row, applied to a versioned Delta table with bad rows refused or quarantined."""

from joins.landing.ingest import ingest_landing, table_layout
from joins.landing.reader import LandingBatch, LandingFileError, LandingRecordError, read_landing
from joins.landing.spec import ColumnSpec, LandingSpec

__all__ = [
    "ColumnSpec",
    "LandingBatch",
    "LandingFileError",
    "LandingRecordError",
    "LandingSpec",
    "ingest_landing",
    "read_landing",
    "table_layout",
]
