"""Field paths into JSON values and the rules for comparing JSON values (not keys: keys follow
`joins.core.keys`).

- `FieldPath`: a dotted path into a JSON object value (`"address.city"`). A field name that
  itself holds a dot cannot be addressed; arrays are not indexed.
- `read_path`: the part of a value at a path, or `MISSING` (distinct from a present JSON null).
- `is_number`: a JSON number (true and false are not numbers, though Python's bool is an int).
- `json_equal`: equality of JSON values as a predicate sees them: 1 == 1.0, but true != 1 and
  "1" != 1; objects and arrays compare member by member.
- `canonical_json`: one spelling per JSON value.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final

from pydantic import AfterValidator, Field


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
    """One spelling per JSON value: object members sorted, no spaces, non-ASCII kept, and each
    number in JSON's own spelling of its type (`1` for the integer, `1.0` for the float)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
