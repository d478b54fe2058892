"""The shape every operator shares.

An operator is a package under `joins/operators/<name>/` with the same four modules, so that a
newcomer finds where a new join type goes in minutes:

- `spec.py`: the pydantic spec (configuration) and the input record model;
- `reference.py`: the record-at-a-time reference processor, readable, mirroring the seeds;
- `spark_batch.py`: the Spark batch form (where the operator has one yet);
- `spark_incremental.py`: the Spark micro-batch step (where the operator has one yet).

The package's `__init__.py` exports `DEFINITION`, an `OperatorDefinition` that the registry and the
replay command use. Spark modules are imported lazily so that the reference engine never needs
pyspark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from joins.spec import Record, Spec

# One emitted item, in the shape of the scenario format's `expected` items (without after_input).
Item = dict[str, Any]


class ReferenceProcessor(Protocol):
    """A record-at-a-time processor: one input record in, the items it emits out, in order."""

    def process(self, record: Any) -> list[Item]: ...


@runtime_checkable
class BatchAware(Protocol):
    """A reference processor whose micro-batch rule needs the batch's bounds (the stream-table
    join's retention clock, `joins.microbatch`); told before a batch's first record and after
    its last."""

    def begin_batch(self) -> None: ...

    def end_batch(self) -> None: ...


# A Spark replay runner: (spec, records in arrival order, batch size, metrics out) -> items with
# after_input.
SparkReplay = Callable[[Any, Sequence[Any], int | None, dict[str, int] | None], list[Item]]


@dataclass(frozen=True)
class OperatorDefinition:
    """What the registry knows about one operator."""

    name: str
    spec_type: type[Spec]
    # Parses one raw input item (a dict from a scenario) into a validated record.
    parse_record: Callable[[Any, int], Record]
    # Builds a fresh reference processor from a validated spec.
    reference: Callable[[Any], ReferenceProcessor]
    # The micro-batch rule: inside one batch, records are processed by ascending phase, arrival
    # order within a phase (table-side records before stream-side records).
    batch_phase: Callable[[Any], int] = lambda _record: 0
    # Table results are compacted to the last value per key per micro-batch.
    compacts_output: bool = False
    # "module:function" of the Spark replay runner, imported only when asked for.
    spark_replay: str | None = None
    # "module:class" of its pipeline spec (YAML, SQL, Dagster), imported only when asked for;
    # None: the operator is not a pipeline of its own.
    pipeline_spec: str | None = None
