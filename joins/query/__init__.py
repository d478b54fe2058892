"""Questions users ask the lake's tables: `get` a key's value valid at a time and its `history`,
now or as of a past commit (`joins.query.versioned`); tables found by name from the pipeline
specs (`joins.query.tables`). `python -m joins table` is the command line for them."""

from joins.query.tables import parse_key, parse_time, versioned_table
from joins.query.versioned import Answer, QueryError, Version, VersionedTableRef, get, history

__all__ = ["Answer", "QueryError", "Version", "VersionedTableRef", "get", "history", "parse_key",
           "parse_time", "versioned_table"]
