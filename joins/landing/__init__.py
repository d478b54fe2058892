"""Landing files (JSON-lines, CSV, Parquet) or a user's Delta table's commits, read as a
changelog with a declared schema and validated row by row (bad rows refused or set apart with
the reason). What is done with the changelog is the ingest's (`joins.ingest`)."""

from joins.landing.reader import LandingBatch, LandingFileError, LandingRecordError, read_landing
from joins.landing.spec import ColumnSpec, LandingSpec

__all__ = [
    "ColumnSpec",
    "LandingBatch",
    "LandingFileError",
    "LandingRecordError",
    "LandingSpec",
    "read_landing",
]
