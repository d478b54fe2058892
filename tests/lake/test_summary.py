"""What a table holds, from its log's statistics alone: the counts must equal Spark's counts of
the same version, per partition and per commit, across appends and partition replacements."""

from __future__ import annotations

import pytest

from joins import lake
from tests.lake.conftest import events

pytestmark = [pytest.mark.spark]


def test_rows_per_partition_and_per_commit_equal_spark_counts(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    assert lake.table_summary(path) is None
    first = lake.write_delta(events(spark, [
        (1, "a", 1.0, "2024-03-01", None), (2, "b", 2.0, "2024-03-01", None),
        (3, "c", 3.0, "2024-03-02", None)]), path, partition_by=["event_date"])
    second = lake.write_delta(events(spark, [
        (4, "d", 4.0, "2024-03-02", None), (5, None, None, "2024-03-03", None)]), path)
    assert lake.commit_rows_by_partition(path, first.version, "event_date") == {
        "2024-03-01": 2, "2024-03-02": 1}
    assert lake.commit_rows_by_partition(path, second.version, "event_date") == {
        "2024-03-02": 1, "2024-03-03": 1}

    summary = lake.table_summary(path, partition_column="event_date", columns=["id", "name"])
    assert summary is not None and summary.version == second.version
    assert summary.rows == 5
    assert summary.rows_by_partition == {"2024-03-01": 2, "2024-03-02": 2, "2024-03-03": 1}
    assert (summary.min["id"], summary.max["id"]) == (1, 5)

    # A replacement of one day: the removed files no longer count.
    replaced = lake.write_delta(events(spark, [(9, "z", 9.0, "2024-03-02", None)]), path,
                                mode="overwrite", replace_partitions={"event_date": ["2024-03-02"]})
    after = lake.table_summary(path, partition_column="event_date")
    assert after is not None and after.version == replaced.version
    assert after.rows_by_partition == {"2024-03-01": 2, "2024-03-02": 1, "2024-03-03": 1}
    by_day = {str(r["event_date"]): r["n"] for r in
              lake.read_delta(spark, path).groupBy("event_date").count().withColumnRenamed(
                  "count", "n").collect()}
    assert by_day == after.rows_by_partition
