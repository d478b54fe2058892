"""A pipeline's input source: a landing folder of files with a declared schema, fed into a
Delta table by the ingest (`joins.ingest`)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from joins.errors import ConfigError
from joins.landing.spec import (
    DEFAULT_MAX_RECORD_BYTES,
    BadRecordPolicy,
    ColumnSpec,
    LandingFormat,
    LandingSpec,
)
from joins.spec import Spec

# Asset keys, Delta folders and Dagster job names are built from these names.
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_IDENT = r"(?:[A-Za-z_][A-Za-z0-9_]*|`[^`]+`)"
_TABLE_NAME = re.compile(rf"^{_IDENT}(?:\.{_IDENT}){{0,2}}$")


def _inner_problem(message: str) -> str:
    """The reading rules' complaint in this source's words: its own keys, no echo of the whole
    mapping (pydantic names the source's path around it)."""
    text = message.removeprefix("landing: invalid config: ")
    text = re.sub(r"config\.\(root\): (Value error, )?", "", text)
    text = re.sub(r" \(got \{.*\}\)$", "", text)
    return re.sub(r"config\.([\w.]+):", r"\1:", text)


def check_name(name: str) -> str:
    if not _NAME.match(name):
        # A ValueError: pydantic reports it under the field's own path (config.stream.name).
        raise ValueError("must be a lower-case identifier (a-z, 0-9, _): it names an asset, a "
                         "Dagster job and a Delta folder")
    return name


class SourceSpec(Spec):
    """One source: a landing folder and the declared schema of its files, or a Delta table.

    - `name`: the asset name and the source id of its ingest commits (lower-case identifier);
    - `landing`: the landing folder, or with `format: delta` the Delta table; a relative path
      is under the lake root (default `landing/<name>`);
    - `catalog_table` (with `format: delta`, instead of `landing`): the Delta table by its name
      in Spark's catalog (`db.name`, `catalog.db.name`), resolved to its location by each
      ingest run (`joins.ingest.catalog`);
    - `format`: `jsonl`, `csv`, `parquet`, or `delta`: a Delta table written by anyone (plain
      PySpark, Databricks), read by version: with its change data feed as a changelog (deletes
      become tombstones at their commit's time, update pre-images are ignored), else from its
      appends (a commit that removed rows is refused, naming the version); the event time may
      be a TIMESTAMP or epoch milliseconds (`joins.landing.delta_cells`);
    - `key_columns`, `value_columns`, `ts_column` (event time, integer ms), `tombstone_column`
      (table sources only; absent = all value columns null means delete);
    - `on_bad_record`: `quarantine` (default: bad rows go to the quarantine table with the
      reason) or `fail` (the batch is refused, naming the file, the row and the field);
    - reading rules (see `joins.landing.LandingSpec`): `csv_delimiter`, `csv_header`,
      `csv_columns` (the columns of header-less CSV files), `max_record_bytes` (default 1 MiB),
      `ts_min_ms` / `ts_max_ms` (a narrower event-time range than years 1..9999).
    """

    name: StrictStr
    landing: StrictStr | None = None
    catalog_table: StrictStr | None = None
    format: LandingFormat
    key_columns: tuple[ColumnSpec, ...] = Field(min_length=1)
    value_columns: tuple[ColumnSpec, ...] = ()
    ts_column: StrictStr
    tombstone_column: StrictStr | None = None
    on_bad_record: BadRecordPolicy = "quarantine"
    description: StrictStr | None = None
    csv_delimiter: StrictStr = ","
    csv_header: StrictBool = True
    csv_columns: tuple[StrictStr, ...] | None = None
    max_record_bytes: StrictInt = DEFAULT_MAX_RECORD_BYTES
    ts_min_ms: StrictInt | None = None
    ts_max_ms: StrictInt | None = None

    @field_validator("name")
    @classmethod
    def _name_is_usable(cls, name: str) -> str:
        return check_name(name)

    @field_validator("catalog_table")
    @classmethod
    def _catalog_name(cls, name: str | None) -> str | None:
        if name is not None and not _TABLE_NAME.match(name):
            raise ValueError(f"{name!r} is not a table name: one to three identifiers joined by "
                             "dots (`db.name`, `catalog.db.name`; `back-quoted` where needed)")
        return name

    @model_validator(mode="after")
    def _catalog_table_is_delta(self) -> SourceSpec:
        if self.catalog_table is not None:
            if self.format != "delta":
                raise ValueError(f"catalog_table: names a Delta table, so it needs format: "
                                 f"delta, not {self.format}")
            if self.landing is not None:
                raise ValueError("catalog_table: give the Delta table by path (landing) or "
                                 "by name (catalog_table), not both")
        return self

    @model_validator(mode="after")
    def _reads(self) -> SourceSpec:
        # The reading rules' own checks, at parse time; a ValueError so that pydantic names
        # this source's path in the spec.
        try:
            self.landing_spec()
        except ConfigError as exc:
            raise ValueError(_inner_problem(str(exc))) from None
        return self

    @property
    def key_column(self) -> str:
        return self.key_columns[0].name

    @property
    def value_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.value_columns)

    def landing_spec(self) -> LandingSpec:
        """The engine's landing schema (joins.landing) for this source's files."""
        config: dict[str, Any] = {
            "format": self.format,
            "key_columns": [c.model_dump() for c in self.key_columns],
            "value_columns": [c.model_dump() for c in self.value_columns],
            "ts_column": self.ts_column,
            "tombstone_column": self.tombstone_column,
            "on_bad_record": self.on_bad_record,
            "csv_delimiter": self.csv_delimiter,
            "csv_header": self.csv_header,
            "csv_columns": self.csv_columns,
            "max_record_bytes": self.max_record_bytes,
        }
        for bound in ("ts_min_ms", "ts_max_ms"):
            if getattr(self, bound) is not None:
                config[bound] = getattr(self, bound)
        return LandingSpec.parse(config)
