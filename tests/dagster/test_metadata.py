"""What the UI shows of a table's columns: the user's own columns as they are, the columns every
operator's tables share and the engine's lineage columns described."""

from __future__ import annotations

from pyspark.sql import types as T

from assets.metadata import LINEAGE, column_schema


def test_shared_and_lineage_columns_are_described() -> None:
    schema = T.StructType([T.StructField("order_id", T.StringType()),
                           T.StructField("ts_utc", T.TimestampType()),
                           T.StructField("event_date", T.DateType()),
                           T.StructField("_l_seq", T.LongType())])
    columns = {c.name: (c.type, c.description) for c in column_schema(schema).value.columns}
    assert columns["order_id"] == ("string", None)
    assert columns["ts_utc"] == ("timestamp", "event time as a TIMESTAMP (UTC)")
    assert "the Dagster partition" in columns["event_date"][1]
    assert columns["_l_seq"] == ("bigint", LINEAGE)
