"""Base for operator specs: pydantic models that refuse unknown keys and explain what is wrong."""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Sequence
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


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, lists, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return models_in(typing.get_args(annotation)[0])
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(models_in(arg))
    return found


def known_keys(cls: type[BaseModel], path: Sequence[Any]) -> list[str]:
    """The keys a mapping at `path` (keys and list indexes) inside a `cls` config may hold:
    the field names (and aliases) of the models found there; empty when none is found."""
    models = [cls]
    for step in path:
        if isinstance(step, int):
            continue  # a list item: the same models
        nxt: list[type[BaseModel]] = []
        for model in models:
            field = model.model_fields.get(str(step))
            if field is not None:
                nxt.extend(models_in(field.annotation))
        models = nxt
    keys: list[str] = []
    for model in models:
        for name, field in model.model_fields.items():
            keys.extend(k for k in (name, field.alias) if isinstance(k, str) and k not in keys)
    return keys


def did_you_mean(key: str, candidates: Sequence[str]) -> str:
    """' (did you mean `x`?)' for a near miss among `candidates`, else ''."""
    close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.6)
    if not close:
        # A key that is a known one with a unit or plural dropped or added (grace -> grace_ms).
        close = [c for c in candidates if c.startswith(key + "_") or key.startswith(c + "_")][:1]
    return f" (did you mean `{close[0]}`?)" if close else ""


def unknown_key_hint(cls: type[BaseModel], loc: Sequence[Any]) -> str:
    return did_you_mean(str(loc[-1]), known_keys(cls, loc[:-1])) if loc else ""


def value_hint(err: Any) -> str:
    """' (did you mean `x`?)' for a misspelt choice (`strng` for `string`), from the values
    pydantic's error lists; else ''."""
    expected = (err.get("ctx") or {}).get("expected")
    if err["type"] not in ("literal_error", "enum") or not isinstance(expected, str) \
            or not isinstance(err.get("input"), str):
        return ""
    return did_you_mean(err["input"], re.findall(r"'([^']*)'", expected))


def config_problem(err: Any, cls: type[BaseModel] | None, loc: Sequence[Any], *,
                   setting_of: str) -> str:
    """One pydantic error of a spec file as `config.<key>: <problem>`: an unknown key with the
    near miss it meant (keys of `cls` at `loc`), a missing one, or the validator's words."""
    key = ".".join(str(p) for p in loc) or "(root)"
    if err["type"] == "extra_forbidden":
        hint = unknown_key_hint(cls, loc) if cls is not None else ""
        return f"config.{key}: unknown key (not a setting of {setting_of}){hint}"
    if err["type"] == "missing":
        return f"config.{key}: required setting is missing"
    # A whole mapping or list echoed back says nothing the key's path does not.
    got = f" (got {err['input']!r})" if not isinstance(err.get("input", {}), dict | list) else ""
    msg = str(err["msg"]).removeprefix("Value error, ")
    # A model's own check (several settings together) starts its words with the setting it
    # blames ("catalog_table: ..."): named as that setting, a spec file's message gets its line.
    setting, colon, rest = msg.partition(": ")
    if cls is not None and colon and setting in known_keys(cls, loc):
        key, msg = ".".join([*(str(p) for p in loc), setting]), rest
    return f"config.{key}: {msg}{got}{value_hint(err)}"


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
        problems = [config_problem(err, cls, err["loc"], setting_of=operator)
                    for err in exc.errors()]
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
