"""Column expressions every operator builds, written to cost few JVM round trips.

In classic PySpark every `F.col`, `F.lit`, `F.when` or operator on a Column is a call into the
JVM (and later another to release it), and a micro-batch builds hundreds of them: measured
~1,800 py4j calls for one 100-event stream-table batch, at 0.1-1 ms each while the JVM plans
and compiles. A SQL expression string is one call however large it is, so the engine writes
its wide expressions (metrics, projections) as SQL text; identifiers from a user's config go
through `ident`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession


def ident(name: str) -> str:
    """`name` as a SQL identifier (back-quoted; any back quote doubled)."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def count_if(cond: Column | str) -> Column:
    """How many rows satisfy `cond` (0 over no rows); a string is a SQL condition."""
    from pyspark.sql import functions as F

    if isinstance(cond, str):
        return F.expr(f"count_if({cond})")
    return F.count_if(cond)


def bigint_constant(spark: SparkSession, value: int) -> Column:
    """`value` as a BIGINT column that whole-stage code generation does not write into a
    stage's Java source (`temporaljoins.Constant`): a value that changes every micro-batch
    would otherwise have the stage compiled anew every batch. A literal where the engine's
    JVM classes are not loaded (Spark Connect)."""
    from pyspark.sql import Column as _Column
    from pyspark.sql import functions as F

    from joins.spark import jvm

    if jvm.unavailable_reason(spark) is not None:
        return F.lit(value).cast("long")
    return _Column(spark._jvm.temporaljoins.Constant.bigint(value))  # type: ignore[attr-defined]
