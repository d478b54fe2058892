"""Base for operator specs: pydantic models that refuse unknown keys and explain what is wrong."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from joins.errors import ConfigError, InputRecordError

SpecT = TypeVar("SpecT", bound=BaseModel)


class Spec(BaseModel):
    """A validated, immutable operator configuration. Unknown keys are an error, never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Record(BaseModel):
    """A validated input record. Unknown keys are an error; `i` is the arrival index."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def describe_validation_error(exc: ValidationError) -> tuple[str, str]:
    """(field path, message) of the first problem, in words a user can act on."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(root)"
    kind = err["type"]
    if kind == "extra_forbidden":
        return loc, "unknown key (not a setting of this operator)"
    if kind == "missing":
        return loc, "required field is missing"
    msg = err["msg"]
    if "input" in err and kind not in ("missing",):
        msg = f"{msg} (got {err['input']!r})"
    return loc, msg


def parse_spec(cls: type[SpecT], config: Any, *, operator: str) -> SpecT:
    """Validate an operator config, turning pydantic's report into a ConfigError naming the key."""
    if not isinstance(config, dict):
        raise ConfigError(f"{operator}: config must be an object, got {type(config).__name__}")
    try:
        return cls.model_validate(config)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(root)"
            if err["type"] == "extra_forbidden":
                problems.append(f"config.{loc}: unknown key (not a setting of {operator})")
            elif err["type"] == "missing":
                problems.append(f"config.{loc}: required setting is missing")
            else:
                got = f" (got {err['input']!r})" if "input" in err else ""
                problems.append(f"config.{loc}: {err['msg']}{got}")
        raise ConfigError(f"{operator}: invalid config: " + "; ".join(problems)) from None


def parse_record(cls: type[SpecT], raw: Any, *, index: int, operator: str) -> SpecT:
    """Validate one input record, naming the record index and the field on failure."""
    if not isinstance(raw, dict):
        raise InputRecordError(f"must be an object, got {type(raw).__name__}",
                               index=index, record=raw, source=f"{operator} input")
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        field, msg = describe_validation_error(exc)
        raise InputRecordError(msg, index=index, field=field, record=raw,
                               source=f"{operator} input") from None
