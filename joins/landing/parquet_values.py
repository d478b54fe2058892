"""Parquet landing files with a row too large to read, found before Spark's reader holds one.

Spark's Parquet reader holds a value whole, and the record-size check reads the row as JSON:
a 300 MB string took a 4 GB local session's JVM down, as a 300 MB JSON line did
(`long_lines`). A file's footer bounds its rows without reading them (`_share_bound`): a row's
share of a plain string or binary chunk is at most the chunk's uncompressed size, of a number
its width, of a list or map (where one dictionary entry or run may stand for every element) the
chunk's value count times its width or size. Only a row group whose bounds add up to more than
`MAX_VALUE_BYTES` is read first, in a Spark task, one column at a time through pyarrow (in the
Python worker, never the session's JVM), and a file with a row over the limit is refused whole
(`bad_file`), as a JSON-lines file with a line over it is. A landing file's row groups are
rarely that large: no file is read again and no job runs for them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from joins.landing.files import MAX_LINE_BYTES, open_landing_file
from joins.landing.per_file import refused_files
from joins.landing.read_failures import raise_if_store_failed, read_error_text

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession

# The same limit as a text line's: what a reader may hold of one record.
MAX_VALUE_BYTES = MAX_LINE_BYTES
_VARIABLE = ("BYTE_ARRAY",)
_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}
# Encodings where one stored value can stand for many decoded ones.
_SHARED = {"PLAIN_DICTIONARY", "RLE_DICTIONARY", "DELTA_BYTE_ARRAY"}


@dataclass(frozen=True)
class Suspect:
    """Row groups of one file whose footer allows a row over the limit, and the top-level
    columns that hold its variable-length data."""

    path: str
    row_groups: tuple[int, ...]
    columns: tuple[str, ...]


def _leaves(typ: pa.DataType) -> int:
    """How many Parquet leaf columns an Arrow field of `typ` is stored as."""
    import pyarrow as pa

    if pa.types.is_struct(typ):
        return sum(_leaves(typ.field(i).type) for i in range(typ.num_fields))
    if pa.types.is_map(typ):
        return _leaves(typ.key_type) + _leaves(typ.item_type)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return _leaves(typ.value_type)
    return 1


def _share_bound(chunk: pq.ColumnChunkMetaData, column: pq.ColumnSchema) -> int:
    """At most how many bytes of one row's values the column chunk holds once decoded."""
    size = chunk.total_uncompressed_size
    if column.max_repetition_level == 0:
        # One value a row: its bytes are in the chunk (whole, or as suffixes summing to it).
        return size if column.physical_type in _VARIABLE else 0
    # A list: one stored value (a dictionary entry, a run, a delta) may stand for every element.
    width = _WIDTH.get(column.physical_type, column.length if column.physical_type ==
                       "FIXED_LEN_BYTE_ARRAY" else 0)
    if width:
        return width * chunk.num_values
    return size * chunk.num_values if _SHARED & set(chunk.encodings) else size


def suspect_of(path: str, metadata: pq.FileMetaData, limit: int | None = None) -> Suspect | None:
    """The row groups of the file at `path` (its footer `metadata`) that may hold a row over
    `limit` bytes (MAX_VALUE_BYTES unless given); None when the footer rules every row out."""
    limit = MAX_VALUE_BYTES if limit is None else limit
    arrow = metadata.schema.to_arrow_schema()
    owner: list[str] = []   # leaf column index -> its top-level column
    for field in arrow:
        owner += [field.name] * _leaves(field.type)
    schema = metadata.schema
    groups: list[int] = []
    columns: set[str] = set()
    for i in range(metadata.num_row_groups):
        group = metadata.row_group(i)
        bounds = {j: _share_bound(group.column(j), schema.column(j)) for j in range(metadata.num_columns)}
        if sum(bounds.values()) > limit:
            groups.append(i)
            columns.update(owner[j] for j, bound in bounds.items() if bound)
    if not groups:
        return None
    return Suspect(path, tuple(groups), tuple(sorted(columns, key=arrow.names.index)))


def _row_bytes(array: pa.Array) -> np.ndarray:
    """Bytes each row of `array` holds: its strings' and binaries' lengths and its numbers'
    widths, nested values summed per row (a null holds nothing)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    typ, n = array.type, len(array)
    if pa.types.is_binary(typ) or pa.types.is_string(typ) or pa.types.is_large_binary(typ) \
            or pa.types.is_large_string(typ) or pa.types.is_binary_view(typ) \
            or pa.types.is_string_view(typ):
        return pc.fill_null(pc.binary_length(array), 0).to_numpy().astype(np.int64)
    if pa.types.is_struct(typ):
        out = np.zeros(n, dtype=np.int64)
        for child in array.flatten():   # the children of the struct's own rows
            out += _row_bytes(child)
        return out
    if pa.types.is_map(typ):
        offsets = np.asarray(array.offsets, dtype=np.int64)
        first, last = int(offsets[0]), int(offsets[-1])
        entries = np.zeros(last - first, dtype=np.int64)
        for child in (array.keys, array.items):
            if len(child) != last - first:
                child = child.slice(first, last - first)
            entries += _row_bytes(child)
        parents = np.repeat(np.arange(n), np.diff(offsets))
        return np.bincount(parents, weights=entries, minlength=n).astype(np.int64)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        values = _row_bytes(array.flatten())
        parents = np.asarray(array.value_parent_indices(), dtype=np.int64)
        return np.bincount(parents, weights=values, minlength=n).astype(np.int64)
    if getattr(typ, "bit_width", 0) > 0:   # numbers, dates, times, decimals, booleans
        return np.full(n, max(typ.bit_width // 8, 1), dtype=np.int64)
    # Anything else (a dictionary, a union): measured row by row.
    return np.array([array.slice(i, 1).nbytes for i in range(n)], dtype=np.int64)


def row_too_large(row: int, size: int, column: str, limit: int) -> str:
    """The problem of a file with a row of `size` bytes (1-based `row`)."""
    return (f"cannot be read: row {row} holds {size} bytes of values (most in column {column!r}), "
            f"more than {limit} bytes, the largest row a reader holds")


def row_problem(suspect: Suspect, limit: int | None = None) -> str | None:
    """Why `suspect`'s file cannot be read (a row over `limit` bytes, or a read error), or
    None. Memory holds one column chunk of one row group at a time."""
    import numpy as np
    import pyarrow.parquet as pq

    limit = MAX_VALUE_BYTES if limit is None else limit
    try:
        with open_landing_file(suspect.path, random_access=True) as stream:
            parquet = pq.ParquetFile(stream)
            starts = np.cumsum([0] + [parquet.metadata.row_group(i).num_rows
                                      for i in range(parquet.metadata.num_row_groups)])
            for group in suspect.row_groups:
                rows = parquet.metadata.row_group(group).num_rows
                total = np.zeros(rows, dtype=np.int64)
                largest = np.zeros(rows, dtype=np.int64)
                which = np.zeros(rows, dtype=np.int64)   # the column holding most of the row
                for k, name in enumerate(suspect.columns):
                    column = parquet.read_row_group(group, columns=[name]).column(0)
                    sizes = _row_bytes(column.combine_chunks())
                    total += sizes
                    more = sizes > largest
                    largest[more], which[more] = sizes[more], k
                over = np.flatnonzero(total > limit)
                if len(over):
                    i = int(over[0])
                    return row_too_large(int(starts[group]) + i + 1, int(total[i]),
                                     suspect.columns[int(which[i])], limit)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... per kind of damage
        return unreadable(exc, suspect.path)
    return None


def unreadable(exc: Exception, path: str) -> str:
    """Why the Parquet file at `path` is refused, from the error reading it; raised instead
    when the error is not the file's (the store's or this process's: `read_failures`)."""
    raise_if_store_failed(exc, path)
    return f"not a readable Parquet file: {read_error_text(exc)}"


def _judged(path: str, row_groups: list[int], columns: list[str], *, limit: int) -> str | None:
    return row_problem(Suspect(path, tuple(row_groups), tuple(columns)), limit)


def files_with_large_rows(spark: SparkSession, suspects: Sequence[Suspect],
                          limit: int | None = None) -> dict[str, str]:
    """{path: problem} of the suspects' files with a row over `limit` bytes (MAX_VALUE_BYTES
    unless given): one Spark job, a file a task, only when there is a suspect."""
    limit = MAX_VALUE_BYTES if limit is None else limit
    return refused_files(spark, [(s.path, list(s.row_groups), list(s.columns)) for s in suspects],
                         "path string, row_groups array<int>, columns array<string>",
                         functools.partial(_judged, limit=limit))
