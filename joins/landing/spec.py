"""The declared schema of landing files: which columns are the key, the value, the event time
and the tombstone, with their types, and what to do with a bad record."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr, model_validator

from joins.errors import ConfigError
from joins.spec import Spec, parse_spec
from joins.versioned.spark_store import RESERVED_COLUMNS, TS_MAX_MS, TS_MIN_MS

OPERATOR = "landing"

ColumnType = Literal["string", "long", "int", "double", "boolean"]
LandingFormat = Literal["jsonl", "csv", "parquet", "delta"]
BadRecordPolicy = Literal["fail", "quarantine"]

# Spark SQL type of each declared type.
SPARK_TYPES: dict[str, str] = {
    "string": "string", "long": "bigint", "int": "int", "double": "double", "boolean": "boolean",
}

# Default record-size limit (bytes of the raw record): Kafka's default message size limit. The
# cap keeps every accepted JSON record within what Spark's JSON parser takes (strings of up
# to 20 M characters).
DEFAULT_MAX_RECORD_BYTES = 1 << 20
MAX_RECORD_BYTES_CAP = 16 << 20

# Plain identifiers only: names are used in JSON paths, SQL expressions and Delta columns.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ColumnSpec(Spec):
    """One declared column. `nullable` applies to value columns (keys are never null)."""

    name: StrictStr
    type: ColumnType
    nullable: StrictBool = True


class LandingSpec(Spec):
    """How to read a changelog from landing files.

    - `format`: `delta` (a Delta table's commits: `joins.landing.delta_cells`), `jsonl` (one
      JSON object per line), `csv` (RFC 4180 as Python's csv module
      reads and writes it: quoted fields may hold the delimiter, doubled quotes and newlines;
      an empty field is null) or `parquet`;
    - `csv_header`: a CSV file starts with a header naming its columns (default); a file whose
      first record does not name the key and event-time columns has no header, and all its
      records are quarantined (or refused) saying so. `csv_columns`: with `csv_header: false`,
      the columns of every file in order (no header line);
    - `key_columns`, `value_columns`: declared names and types; the table keeps the names;
    - `ts_column`: the event time, an integer (ms); a fraction such as 1.5, an exponent such as
      1e3 or a string such as "12:00" is a bad record, never rounded (JSON 1.0 is the integer 1);
      it must lie within `ts_min_ms`..`ts_max_ms` (default: years 1..9999, the range a table's
      event date exists for; a declared range narrows it);
    - `tombstone_column`: a boolean column marking deletes; when absent, a record whose value
      columns are all null is a tombstone (the null-value convention of Kafka);
    - `max_record_bytes`: the largest record accepted (bytes of the raw line or CSV record, of
      the row as JSON for Parquet; default 1 MiB, at most 16 MiB); a larger one is a bad record
      with its own reason;
    - `on_bad_record`: `fail` refuses the whole batch with an error naming the file, the row and
      the field; `quarantine` stores the bad rows in the quarantine table with the reason.
    """

    format: LandingFormat
    key_columns: tuple[ColumnSpec, ...] = Field(min_length=1)
    value_columns: tuple[ColumnSpec, ...] = ()
    ts_column: StrictStr
    tombstone_column: StrictStr | None = None
    on_bad_record: BadRecordPolicy = "fail"
    csv_delimiter: StrictStr = Field(default=",", min_length=1, max_length=1)
    csv_header: StrictBool = True
    csv_columns: tuple[StrictStr, ...] | None = None
    ts_min_ms: StrictInt = Field(default=TS_MIN_MS, ge=TS_MIN_MS, le=TS_MAX_MS)
    ts_max_ms: StrictInt = Field(default=TS_MAX_MS, ge=TS_MIN_MS, le=TS_MAX_MS)
    max_record_bytes: StrictInt = Field(default=DEFAULT_MAX_RECORD_BYTES, ge=1,
                                        le=MAX_RECORD_BYTES_CAP)

    @model_validator(mode="after")
    def _columns_are_consistent(self) -> LandingSpec:
        declared_in: dict[str, str] = {}
        named = [("key_columns", c.name) for c in self.key_columns]
        named += [("value_columns", c.name) for c in self.value_columns]
        named.append(("ts_column", self.ts_column))
        if self.tombstone_column is not None:
            named.append(("tombstone_column", self.tombstone_column))
        for setting, name in named:
            if not _NAME.match(name):
                raise ValueError(f"{setting}: {name!r} is not a plain column name "
                                 f"(letters, digits and _, not starting with a digit)")
            if name in declared_in:
                raise ValueError(f"{setting}: column {name!r} is declared twice "
                                 f"(also in {declared_in[name]})")
            declared_in[name] = setting
        for setting, name in named[:len(self.key_columns) + len(self.value_columns)]:
            if name in RESERVED_COLUMNS:
                raise ValueError(f"{setting}: column name {name!r} is reserved by the versioned "
                                 f"table ({', '.join(sorted(RESERVED_COLUMNS))})")
        if self.tombstone_column is None and not self.value_columns:
            raise ValueError("tombstone_column: required when there are no value_columns (the "
                             "null-value convention would make every record a tombstone)")
        if self.ts_min_ms > self.ts_max_ms:
            raise ValueError(f"ts_min_ms: {self.ts_min_ms} is after ts_max_ms {self.ts_max_ms}")
        self._check_csv_columns()
        return self

    def _check_csv_columns(self) -> None:
        if self.csv_columns is None:
            if self.format == "csv" and not self.csv_header:
                raise ValueError("csv_columns: required when csv_header is false (without a "
                                 "header line the columns must be declared, in file order)")
            return
        if self.format != "csv" or self.csv_header:
            raise ValueError("csv_columns: only for format csv with csv_header: false (a header "
                             "line names the columns itself)")
        if len(set(self.csv_columns)) != len(self.csv_columns):
            raise ValueError(f"csv_columns: a column is listed twice in {list(self.csv_columns)}")
        missing = [n for n in (*self.key_names, self.ts_column) if n not in self.csv_columns]
        if missing:
            raise ValueError(f"csv_columns: must include the key and event-time columns; "
                             f"missing {missing}")

    @classmethod
    def parse(cls, config: Any) -> LandingSpec:
        """Validate a config dict; a bad one raises ConfigError naming the key."""
        return parse_spec(cls, config, operator=OPERATOR)

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.key_columns)

    @property
    def value_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.value_columns)

    def checked_columns(self) -> list[tuple[str, str]]:
        """(name, declared type) of every column read from a file, in the order problems are
        reported: keys, event time, tombstone flag, values."""
        cols = [(c.name, c.type) for c in self.key_columns]
        cols.append((self.ts_column, "long"))
        if self.tombstone_column is not None:
            cols.append((self.tombstone_column, "boolean"))
        cols += [(c.name, c.type) for c in self.value_columns]
        return cols


def require_spec(spec: Any) -> LandingSpec:
    if isinstance(spec, LandingSpec):
        return spec
    if isinstance(spec, dict):
        return LandingSpec.parse(spec)
    raise ConfigError(f"{OPERATOR}: spec must be a LandingSpec or a dict, got {type(spec).__name__}")
