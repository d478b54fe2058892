"""`interval_join`: Hazelcast's bounded stream-to-stream join (seed 003) on JSON rows."""

from joins.core.operator import OperatorDefinition
from joins.operators.interval_join.reference import IntervalJoinProcessor, restore
from joins.operators.interval_join.spec import (
    IntervalJoinRecord,
    IntervalJoinSpec,
    parse_interval_join_record,
)

DEFINITION = OperatorDefinition(
    name="interval_join",
    spec_type=IntervalJoinSpec,
    parse_record=parse_interval_join_record,
    reference=IntervalJoinProcessor,
    # Both inputs are streams: arrival order is the only order, also inside a micro-batch.
    batch_phase=lambda _record: 0,
    compacts_output=False,
    spark_replay="joins.operators.interval_join.spark_replay:spark_replay",
    pipeline_spec="joins.operators.interval_join.pipeline:IntervalJoinPipeline",
)

__all__ = [
    "DEFINITION",
    "IntervalJoinProcessor",
    "IntervalJoinRecord",
    "IntervalJoinSpec",
    "parse_interval_join_record",
    "restore",
]
