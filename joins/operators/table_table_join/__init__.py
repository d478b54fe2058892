"""`table_table_join`: the primary-key table-table join with per-side versioning (seed 000, KIP-914)."""

from joins.core.operator import OperatorDefinition
from joins.operators.table_table_join.reference import TableTableJoinProcessor
from joins.operators.table_table_join.spec import TableTableJoinSpec, parse_table_table_join_record

DEFINITION = OperatorDefinition(
    name="table_table_join",
    spec_type=TableTableJoinSpec,
    parse_record=parse_table_table_join_record,
    reference=TableTableJoinProcessor,
    # Both sides are tables: each side's updates are applied in arrival order, interleaved.
    batch_phase=lambda _record: 0,
    compacts_output=True,
    spark_replay="joins.operators.table_table_join.spark_replay:spark_replay",
    pipeline_spec="joins.operators.table_table_join.pipeline:TableTableJoinPipeline",
)

__all__ = ["DEFINITION"]
