"""The one list of operators, looked up by the name scenario files and pipeline specs use (their
`operator` field): each name is a package of `joins.operators` exporting `DEFINITION`."""

from __future__ import annotations

import importlib

from joins.core.operator import OperatorDefinition
from joins.errors import ConfigError

OPERATOR_NAMES: tuple[str, ...] = (
    "versioned_table",
    "stream_table_join",
    "table_table_join",
    "fk_join",
    "table_filter",
    "table_map",
    "table_aggregate",
    "interval_join",
)


def get_operator(name: str) -> OperatorDefinition:
    if name not in OPERATOR_NAMES:
        raise ConfigError(
            f"unknown operator {name!r}; expected one of: {', '.join(OPERATOR_NAMES)}")
    module = importlib.import_module(f"joins.operators.{name}")
    definition: OperatorDefinition = module.DEFINITION
    return definition
