"""`stream_table_join`: KIP-914's timestamped lookup (seed 000) and KIP-923's grace buffer (seed 001)."""

from joins.core.operator import OperatorDefinition
from joins.operators.stream_table_join.reference import StreamTableJoinProcessor
from joins.operators.stream_table_join.spec import (
    StreamTableJoinSpec,
    batch_phase,
    parse_stream_table_record,
)

DEFINITION = OperatorDefinition(
    name="stream_table_join",
    spec_type=StreamTableJoinSpec,
    parse_record=parse_stream_table_record,
    reference=StreamTableJoinProcessor,
    batch_phase=batch_phase,
    compacts_output=False,
    spark_replay="joins.operators.stream_table_join.spark_replay:spark_replay",
    pipeline_spec="joins.operators.stream_table_join.pipeline:StreamTableJoinPipeline",
)

__all__ = ["DEFINITION"]
