"""Configuration and input records of the `table_filter` operator (seed 002, KIP-914).

Config (see FORMAT.md):

- `predicate`: `{"field": optional path, "op": "eq|ne|lt|le|gt|ge|in|not_in", "value": JSON}`.
  `field` is a dotted path into the value (`"address.city"`); no field = the whole value. A field
  name that itself holds a dot cannot be addressed; arrays are not indexed. `in` / `not_in` take a
  list as `value`; `lt` / `le` / `gt` / `ge` take a number or a string.
- `versioned`: is the input table versioned (materialised as a versioned store upstream).
- `history_retention_ms`: the versioned input's history retention; required when `versioned` is
  true, refused when it is false (it would mean nothing).

This module also holds the small value rules that `table_aggregate` shares: the dotted field path,
JSON equality (a boolean is never a number) and the single-table input record.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictInt, model_validator

from joins.errors import ConfigError
from joins.spec import Record, Spec, parse_record

OPERATOR = "table_filter"

PredicateOp = Literal["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in"]
ORDERING_OPS: Final = frozenset({"lt", "le", "gt", "ge"})
MEMBERSHIP_OPS: Final = frozenset({"in", "not_in"})


class _Missing:
    """The result of reading a field the value does not hold (distinct from a JSON null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def _check_path(path: str) -> str:
    if not path or any(part == "" for part in path.split(".")):
        raise ValueError(f"a field path is one or more non-empty names joined by '.', got {path!r}")
    return path


# A dotted path into a JSON object value.
FieldPath = Annotated[str, Field(strict=True), AfterValidator(_check_path)]


def read_path(value: Any, path: str | None) -> Any:
    """The part of `value` at the dotted `path` (None = the whole value), or MISSING when an
    intermediate is not an object or a name is absent. A present JSON null reads as None."""
    if path is None:
        return value
    current = value
    for name in path.split("."):
        if not isinstance(current, dict) or name not in current:
            return MISSING
        current = current[name]
    return current


def is_number(value: Any) -> bool:
    # JSON true/false are not numbers, though Python's bool is an int.
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: 1 == 1.0, but true != 1 and "1" != 1; objects and arrays
    compare member by member."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) or is_number(b):
        return is_number(a) and is_number(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def canonical_json(value: Any) -> str:
    """One spelling per JSON value, usable as a dict key or a sort key."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _config_error(key: str, message: str) -> ConfigError:
    return ConfigError(f"{OPERATOR}: invalid config: config.{key}: {message}")


class PredicateSpec(Spec):
    """`field op value`, evaluated on each new (and old) value of the input table."""

    field: FieldPath | None = None
    op: PredicateOp
    # Required even when null: `eq null` is a real predicate, a forgotten value is not.
    value: Any = Field(...)

    @model_validator(mode="after")
    def _value_fits_op(self) -> PredicateSpec:
        if self.op in MEMBERSHIP_OPS and not isinstance(self.value, list):
            raise _config_error("predicate.value", f"op {self.op!r} needs a list of values, "
                                f"got {self.value!r}")
        if self.op in ORDERING_OPS and not (is_number(self.value) or isinstance(self.value, str)):
            raise _config_error("predicate.value", f"op {self.op!r} compares numbers or strings, "
                                f"got {self.value!r}")
        return self


class VersionedInputSpec(Spec):
    """`versioned` and `history_retention_ms` of an operator that reads one input table."""

    # Names the operator in error messages; each subclass sets its own.
    operator_name: ClassVar[str] = OPERATOR

    versioned: StrictBool
    history_retention_ms: StrictInt | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _retention_matches_versioning(self) -> VersionedInputSpec:
        if self.versioned and self.history_retention_ms is None:
            raise ConfigError(f"{self.operator_name}: invalid config: config.history_retention_ms: "
                              "required when versioned is true (how much history the versioned "
                              "input table keeps)")
        if not self.versioned and self.history_retention_ms is not None:
            raise ConfigError(f"{self.operator_name}: invalid config: config.history_retention_ms: "
                              "only meaningful for a versioned input (versioned is false); remove "
                              "it or set versioned to true")
        return self

    @property
    def retention_ms(self) -> int:
        """History retention for `make_store` (unused by an unversioned store)."""
        return self.history_retention_ms or 0


class TableFilterSpec(VersionedInputSpec):
    predicate: PredicateSpec


def _key_not_null_or_array(key: Any) -> Any:
    # A table cannot hold a null key (Kafka's table source drops it); arrays are not keys in the
    # scenario format. Refusing here names the record instead of losing it.
    if key is None:
        raise ValueError("key must not be null")
    if isinstance(key, list):
        raise ValueError("key must be a JSON scalar or object, not an array")
    return key


TableKey = Annotated[Any, AfterValidator(_key_not_null_or_array)]


class TableRecord(Record):
    """`{"i", "key", "value", "ts"}`: one update of a single input table. The value is required
    but may be null (a tombstone); an empty string is a value."""

    i: StrictInt
    key: TableKey = Field(...)
    value: Any = Field(...)
    ts: StrictInt


def parse_table_filter_record(raw: Any, index: int) -> TableRecord:
    return parse_record(TableRecord, raw, index=index, operator=OPERATOR)
