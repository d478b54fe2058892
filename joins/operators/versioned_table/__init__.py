"""`versioned_table`: the versioned store of seeds 000/002 as an operator of its own."""

from joins.core.operator import OperatorDefinition
from joins.operators.versioned_table.reference import VersionedTableProcessor
from joins.operators.versioned_table.spec import VersionedTableSpec, parse_versioned_table_record

DEFINITION = OperatorDefinition(
    name="versioned_table",
    spec_type=VersionedTableSpec,
    parse_record=parse_versioned_table_record,
    reference=VersionedTableProcessor,
    # Every op is a table op: arrival order is the only order inside a micro-batch.
    batch_phase=lambda _record: 0,
    compacts_output=False,
    spark_replay="joins.operators.versioned_table.spark_replay:spark_replay",
)

__all__ = ["DEFINITION"]
