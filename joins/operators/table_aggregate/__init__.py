"""`table_aggregate`: KGroupedTable aggregation that ignores out-of-order versioned updates (seed 002)."""

from joins.core.operator import OperatorDefinition
from joins.operators.table_aggregate.reference import TableAggregateProcessor
from joins.operators.table_aggregate.spec import TableAggregateSpec, parse_table_aggregate_record

DEFINITION = OperatorDefinition(
    name="table_aggregate",
    spec_type=TableAggregateSpec,
    parse_record=parse_table_aggregate_record,
    reference=TableAggregateProcessor,
    # One input table: arrival order is the only order inside a micro-batch.
    batch_phase=lambda _record: 0,
    compacts_output=True,
    spark_replay="joins.operators.table_aggregate.spark_replay:spark_replay",
    pipeline_spec="joins.operators.table_aggregate.pipeline:TableAggregatePipeline",
)

__all__ = ["DEFINITION"]
