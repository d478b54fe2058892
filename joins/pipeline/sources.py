"""A pipeline's input source: a landing folder of files with a declared schema, fed into a
Delta table by the ingest (`joins.ingest`)."""

from __future__ import annotations

import re

from pydantic import Field, StrictStr, field_validator

from joins.landing.spec import BadRecordPolicy, ColumnSpec, LandingFormat, LandingSpec
from joins.spec import Spec

# Asset keys, Delta folders and Dagster job names are built from these names.
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def check_name(name: str) -> str:
    if not _NAME.match(name):
        # A ValueError: pydantic reports it under the field's own path (config.stream.name).
        raise ValueError("must be a lower-case identifier (a-z, 0-9, _): it names an asset, a "
                         "Dagster job and a Delta folder")
    return name


class SourceSpec(Spec):
    """One source: a landing folder and the declared schema of its files.

    - `name`: the asset name and the source id of its ingest commits (lower-case identifier);
    - `landing`: the landing folder; a relative path is under the lake root (default
      `landing/<name>`);
    - `format`: `jsonl`, `csv` or `parquet`;
    - `key_columns`, `value_columns`, `ts_column` (event time, integer ms), `tombstone_column`
      (table sources only; absent = all value columns null means delete);
    - `on_bad_record`: `quarantine` (default: bad rows go to the quarantine table with the
      reason) or `fail` (the batch is refused, naming the file, the row and the field).
    """

    name: StrictStr
    landing: StrictStr | None = None
    format: LandingFormat
    key_columns: tuple[ColumnSpec, ...] = Field(min_length=1)
    value_columns: tuple[ColumnSpec, ...] = ()
    ts_column: StrictStr
    tombstone_column: StrictStr | None = None
    on_bad_record: BadRecordPolicy = "quarantine"
    description: StrictStr | None = None

    @field_validator("name")
    @classmethod
    def _name_is_usable(cls, name: str) -> str:
        return check_name(name)

    @property
    def key_column(self) -> str:
        return self.key_columns[0].name

    @property
    def value_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.value_columns)

    def landing_spec(self) -> LandingSpec:
        """The engine's landing schema (joins.landing) for this source's files."""
        return LandingSpec.parse({
            "format": self.format,
            "key_columns": [c.model_dump() for c in self.key_columns],
            "value_columns": [c.model_dump() for c in self.value_columns],
            "ts_column": self.ts_column,
            "tombstone_column": self.tombstone_column,
            "on_bad_record": self.on_bad_record,
        })
