"""Errors of the Delta Lake layer. Each names the table and, where one is at fault, the column."""

from __future__ import annotations

from joins.errors import JoinsError


class LakeError(JoinsError):
    """A Delta table cannot be read or written as asked (missing table, unsupported feature,
    bad argument, failed commit). The message names the table path."""


class SchemaMismatchError(LakeError):
    """The data's schema does not fit the table's: names the column and both types."""

    def __init__(self, message: str, *, column: str, table_type: str | None = None,
                 data_type: str | None = None) -> None:
        self.column = column
        self.table_type = table_type
        self.data_type = data_type
        super().__init__(message)


class UnsupportedTableError(LakeError):
    """The table uses a Delta feature this layer cannot honour (deletion vectors, column
    mapping, constraints...). Refusing beats returning wrong rows or writing a bad commit."""


class ConcurrentCommitError(LakeError):
    """A version-guarded commit found that another writer committed to the table since the
    version it was planned against; nothing was committed."""
