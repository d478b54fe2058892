"""`fk_join`: the foreign-key table-table join of KIP-213 (seed 004), with seed 000's rules for
versioned sides. The protocol lives in `protocol.py` (messages), `lhs.py` and `rhs.py` (the two
processors); `reference.py` wires them through explicit queues."""

from joins.core.operator import OperatorDefinition
from joins.operators.fk_join.reference import FkJoinProcessor
from joins.operators.fk_join.spec import FkJoinSpec, batch_phase, parse_fk_record

DEFINITION = OperatorDefinition(
    name="fk_join",
    spec_type=FkJoinSpec,
    parse_record=parse_fk_record,
    reference=FkJoinProcessor,
    batch_phase=batch_phase,
    compacts_output=True,
    spark_replay="joins.operators.fk_join.spark_replay:spark_replay",
    pipeline_spec="joins.operators.fk_join.pipeline:FkJoinPipeline",
)

__all__ = ["DEFINITION"]
