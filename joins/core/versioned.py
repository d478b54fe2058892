"""The versioned-input spec: how an operator's input table is materialised.

`{"versioned": bool, "history_retention_ms": int}`: a versioned table (KIP-889/914) keeps each
key's history by event time for `history_retention_ms` behind its stream time; an unversioned
one keeps the latest value by arrival. THE one rule: the retention is required iff the input is
versioned, and refused otherwise (it would mean nothing). The message names the setting where it
is used: `config.table.history_retention_ms` for a nested side, `config.history_retention_ms`
for an operator whose config holds the two settings itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, StrictBool, StrictInt, model_validator

from joins.core.keys import TableKey
from joins.core.time import DurationMs
from joins.errors import config_error
from joins.spec import Record, Spec


class VersionedInput(Spec):
    """One input table's materialisation: versioned (timestamp semantics, with history retention)
    or unversioned (arrival semantics)."""

    versioned: StrictBool
    history_retention_ms: DurationMs | None = None

    @property
    def retention_ms(self) -> int:
        """History retention for `make_store` (unused by an unversioned store)."""
        return self.history_retention_ms or 0

    def check(self, operator: str, at: str = "") -> None:
        """Refuse a retention that does not match the versioning. `at` is the dotted prefix of
        this input in the config (`"left."`, `"table."`, or `""` at the top level)."""
        key = f"{at}history_retention_ms"
        if self.versioned and self.history_retention_ms is None:
            raise config_error(operator, key, f"required when {at}versioned is true (how much "
                               "history the versioned table keeps)")
        if not self.versioned and self.history_retention_ms is not None:
            raise config_error(operator, key, f"only meaningful for a versioned table ({at}versioned "
                               f"is false); remove it or set {at}versioned to true")


class VersionedInputSpec(VersionedInput):
    """Base of an operator that reads one input table and holds `versioned` and
    `history_retention_ms` at the top level of its config."""

    # Names the operator in error messages; each subclass sets its own.
    operator_name: ClassVar[str]

    @model_validator(mode="after")
    def _retention_matches_versioning(self) -> VersionedInputSpec:
        self.check(self.operator_name)
        return self


class TableRecord(Record):
    """`{"i", "key", "value", "ts"}`: one update of a single input table. The value is required
    but may be null (a tombstone); an empty string is a value."""

    i: StrictInt
    key: TableKey = Field(...)
    value: Any = Field(...)
    ts: StrictInt
