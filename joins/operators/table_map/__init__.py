"""`table_map`: KTable#mapValues as a projection with renames, on a versioned or unversioned
table (seed 002's versioning rules)."""

from joins.core.operator import OperatorDefinition
from joins.operators.table_map.reference import TableMapProcessor
from joins.operators.table_map.spec import TableMapSpec, parse_table_map_record

DEFINITION = OperatorDefinition(
    name="table_map",
    spec_type=TableMapSpec,
    parse_record=parse_table_map_record,
    reference=TableMapProcessor,
    # One input table: arrival order is the only order inside a micro-batch.
    batch_phase=lambda _record: 0,
    compacts_output=True,
    spark_replay="joins.operators.table_map.spark_replay:spark_replay",
    pipeline_spec="joins.operators.table_map.pipeline:TableMapPipeline",
)

__all__ = ["DEFINITION"]
