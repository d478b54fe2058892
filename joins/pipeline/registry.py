"""The union of every operator's pipeline spec, discriminated by `operator`.

Which operators are pipelines is the operator registry's to say (`joins.operators.registry`:
an operator's `DEFINITION.pipeline_spec`); YAML files, SQL files, the Dagster factory and the
docs pick them up from here.
"""

from __future__ import annotations

import functools
import importlib
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from joins.errors import ConfigError, config_error
from joins.operators.registry import OPERATOR_NAMES, get_operator
from joins.pipeline.spec import PipelineSpec
from joins.spec import config_problem


@functools.cache
def spec_classes() -> dict[str, type[PipelineSpec]]:
    """operator -> its pipeline spec class, for every operator that has one."""
    out = {}
    for operator in OPERATOR_NAMES:
        target = get_operator(operator).pipeline_spec
        if target is not None:
            module, name = target.split(":")
            out[operator] = getattr(importlib.import_module(module), name)
    return out


@functools.cache
def _adapter() -> TypeAdapter[Any]:
    classes = tuple(spec_classes().values())
    union = classes[0] if len(classes) == 1 else functools.reduce(lambda a, b: a | b, classes)
    return TypeAdapter(Annotated[union, Field(discriminator="operator")])


def parse_pipeline_spec(raw: Any) -> PipelineSpec:
    """A validated pipeline spec from a dict (YAML, JSON) or a spec; ConfigError naming the key."""
    if isinstance(raw, PipelineSpec):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(f"pipeline spec: must be a mapping of settings, got {type(raw).__name__}")
    name = raw.get("name")
    operator = raw.get("operator")
    who = f"{operator if isinstance(operator, str) else 'pipeline'} spec" + (
        f" {name!r}" if isinstance(name, str) and name else "")
    known = ", ".join(spec_classes())
    if operator is None:
        raise config_error(who, "operator", f"required: which join this pipeline runs ({known})")
    if operator not in spec_classes():
        raise config_error(who, "operator", f"unknown operator {operator!r}; pipelines exist for: "
                                            f"{known}")
    try:
        spec: PipelineSpec = _adapter().validate_python(raw)
    except ValidationError as exc:
        raise ConfigError(f"{who}: invalid config: " + "; ".join(
            _problem(err) for err in exc.errors())) from None
    return spec


def _problem(err: Any) -> str:
    loc = list(err["loc"])
    cls = None
    if loc and loc[0] in spec_classes():  # the union's tag, not a key of the file
        cls = spec_classes()[loc[0]]
        loc = loc[1:]
    return config_problem(err, cls, loc, setting_of="this pipeline")
