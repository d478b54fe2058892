"""Run a scenario on an engine: validate config and records, then replay in micro-batches."""

from __future__ import annotations

import importlib
from typing import Any

from joins.core.operator import Item
from joins.errors import ConfigError, InputRecordError
from joins.microbatch import run_reference
from joins.operators.registry import get_operator
from joins.scenario.model import Scenario
from joins.spec import parse_spec

ENGINES = ("reference", "spark")


def prepare(scenario: Scenario) -> tuple[Any, Any, list[Any]]:
    """(definition, validated spec, validated records) or ConfigError / InputRecordError."""
    definition = get_operator(scenario.operator)
    spec = parse_spec(definition.spec_type, scenario.config, operator=scenario.operator)
    records = []
    for pos, raw in enumerate(scenario.input):
        record = definition.parse_record(raw, pos)
        if record.i != pos:
            raise InputRecordError(f"arrival index must be {pos} (the item's position), got {record.i}",
                                   index=pos, field="i", record=raw,
                                   source=f"{scenario.operator} input")
        records.append(record)
    return definition, spec, records


def run_scenario(scenario: Scenario, engine: str = "reference",
                 batch_size: int | None = None, metrics: dict[str, int] | None = None) -> list[Item]:
    """Items the engine emits, each with `after_input`.

    Batch size defaults: the reference engine processes one record at a time; the Spark engine
    takes the whole input as one micro-batch.
    """
    definition, spec, records = prepare(scenario)
    if engine == "reference":
        return run_reference(definition, spec, records, 1 if batch_size is None else batch_size,
                             metrics)
    if engine == "spark":
        if definition.spark_replay is None:
            raise ConfigError(f"operator {scenario.operator!r} has no Spark engine yet; "
                              f"use --engine reference")
        module_name, func_name = definition.spark_replay.split(":")
        replay = getattr(importlib.import_module(module_name), func_name)
        items: list[Item] = replay(spec, records, batch_size, metrics)
        return items
    raise ConfigError(f"unknown engine {engine!r}; expected one of: {', '.join(ENGINES)}")
