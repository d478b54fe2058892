"""The Spark Connect client's side of the Delta writer: a DeltaTxn operation sent to the server's
`TxnPlugin` (joins/spark/jvm) as a relation extension, whose one row is the answer.

Spark's own `Hint` message carries the request (its name: `temporaljoins.txn:<operation>:<JSON>`)
over the data to write, so nothing but pyspark's protobuf is needed here. The plugin runs the
operation while the server builds the plan: collecting the relation runs it once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PREFIX = "temporaljoins.txn:"


def call_plugin(spark: SparkSession, operation: str, request: str,
                data: DataFrame | None = None) -> str:
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    from joins.lake.errors import LakeError

    source = data if data is not None else spark.range(0)
    plan = _plan_class()(source._plan, PREFIX + operation + ":" + request)  # type: ignore[attr-defined]
    try:
        rows = ConnectFrame(plan, spark).collect()  # type: ignore[arg-type]
    except PySparkException as exc:
        if "NO_HANDLER_FOR_EXTENSION" in str(exc):
            raise LakeError("the Spark Connect server has no temporal-joins Delta writer: start it "
                            "with joins.spark.server (spark.connect.extensions.relation.classes="
                            "temporaljoins.TxnPlugin and the engine's jar)") from exc
        raise
    return str(rows[0][0])


_plan: Any = None


def _plan_class() -> Any:
    """The LogicalPlan subclass, defined on first use (pyspark's Connect modules import grpc)."""
    global _plan
    if _plan is None:
        from pyspark.sql.connect import proto
        from pyspark.sql.connect.plan import LogicalPlan

        class TxnRelation(LogicalPlan):
            def __init__(self, child: LogicalPlan, name: str) -> None:
                super().__init__(child)
                self._name = name

            def plan(self, session: Any) -> proto.Relation:
                relation = self._create_proto_relation()
                hint = proto.Hint(name=self._name)
                hint.input.CopyFrom(self._child.plan(session))  # type: ignore[union-attr]
                relation.extension.Pack(hint)
                return relation

        _plan = TxnRelation
    return _plan
