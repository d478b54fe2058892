"""Audit queries over a pipeline's tables: duplicates, quarantine accounting, versioned reads.
Each is a Spark job whose answer is a handful of numbers (or, for display, one key's rows)."""

from joins.audit.counts import (
    Duplicates,
    QuarantineCounts,
    count_rows,
    duplicate_rows,
    quarantine_by_kind,
    quarantine_counts,
)
from joins.audit.preview import QuarantinedRow, recent_quarantined
from joins.audit.versioned import lookup_as_of, table_stream_time, versions_of_key

__all__ = [
    "Duplicates",
    "QuarantineCounts",
    "QuarantinedRow",
    "count_rows",
    "duplicate_rows",
    "lookup_as_of",
    "quarantine_by_kind",
    "quarantine_counts",
    "recent_quarantined",
    "table_stream_time",
    "versions_of_key",
]
