"""Helpers the Spark-versus-reference tests of the table operators share: records from raw
dicts, explicit batch cuts, the reference engine over those batches, shipped scenarios."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from joins.core.operator import Item, OperatorDefinition
from joins.microbatch import run_batches

SCENARIOS = Path(__file__).resolve().parents[2] / "tests" / "scenarios"


def records_of(definition: OperatorDefinition, raw: Sequence[dict[str, Any]],
               start: int = 0) -> list[Any]:
    return [definition.parse_record({**r, "i": start + n}, start + n) for n, r in enumerate(raw)]


def cut(records: Sequence[Any], cuts: Sequence[int]) -> list[Sequence[Any]]:
    """Batches of the sizes in `cuts`, the rest as one last batch."""
    batches, pos = [], 0
    for size in cuts:
        if pos < len(records):
            batches.append(records[pos:pos + size])
            pos += size
    if pos < len(records):
        batches.append(records[pos:])
    return batches


def reference_items(definition: OperatorDefinition, spec: Any, batches: Sequence[Sequence[Any]],
                    metrics: dict[str, int] | None = None) -> list[Item]:
    """The reference engine over explicit (possibly uneven) micro-batches."""
    return run_batches(definition, spec, batches, metrics)


def nonzero(metrics: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in metrics.items() if v}


def scenarios_of(operator: str) -> list[Path]:
    """Every shipped scenario of `operator` that is not a config-error scenario."""
    return [p for p in sorted(SCENARIOS.glob("*.json"))
            if (raw := json.loads(p.read_text())).get("operator") == operator
            and raw.get("expected_error") is None]
