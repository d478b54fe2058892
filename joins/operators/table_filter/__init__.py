"""`table_filter`: KTable#filter, with the null-to-null drop disabled on versioned input (seed 002)."""

from joins.core.operator import OperatorDefinition
from joins.operators.table_filter.reference import TableFilterProcessor
from joins.operators.table_filter.spec import TableFilterSpec, parse_table_filter_record

DEFINITION = OperatorDefinition(
    name="table_filter",
    spec_type=TableFilterSpec,
    parse_record=parse_table_filter_record,
    reference=TableFilterProcessor,
    # One input table: arrival order is the only order inside a micro-batch.
    batch_phase=lambda _record: 0,
    compacts_output=True,
    spark_replay="joins.operators.table_filter.spark_replay:spark_replay",
    pipeline_spec="joins.operators.table_filter.pipeline:TableFilterPipeline",
)

__all__ = ["DEFINITION"]
