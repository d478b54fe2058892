"""Random sequences of writes against a plain-Python model of the table: after each commit the
table read by Spark, by delta-rs and at every earlier version equals the model."""

from __future__ import annotations

import datetime as dt
import tempfile
from typing import Any

import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.lake import AppTxn, read_changes, read_delta, write_delta
from tests.budget import examples

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]
_rows = st.lists(st.tuples(st.integers(0, 50), st.sampled_from(DAYS),
                           st.one_of(st.none(), st.text(max_size=3))), max_size=4)
_op = st.one_of(
    st.tuples(st.just("append"), _rows, st.none()),
    st.tuples(st.just("overwrite"), _rows, st.none()),
    st.tuples(st.just("replace"), _rows, st.sets(st.sampled_from(DAYS), min_size=1)),
    st.tuples(st.just("replay"), _rows, st.none()),
)

Row = tuple[int, str, "str | None"]


def key(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=repr)


@settings(max_examples=examples(6))
@given(st.lists(_op, min_size=1, max_size=4))
def test_writes_match_a_model(spark, ops: list[tuple[str, list[Row], Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix="lake-model-") as root:  # an example's lake, removed
        _writes_match_a_model(spark, root + "/t", ops)


def _writes_match_a_model(spark: Any, path: str, ops: list[tuple[str, list[Row], Any]]) -> None:
    history: list[list[Row]] = []       # model rows at each version
    appended: list[list[Row] | None] = []  # rows added by each version if it removed nothing
    table: list[Row] = []
    last_txn: int | None = None  # app transaction of the last append, replayed by "replay"
    for kind, rows, days in ops:
        if kind == "replace":
            rows = [r for r in rows if r[1] in days]
        df = spark.createDataFrame([(i, dt.date.fromisoformat(d), s) for i, d, s in rows],
                                   "id long, event_date date, s string")
        if kind == "replay" and last_txn is not None:
            info = write_delta(df, path, app_txn=AppTxn("model", last_txn))
            assert info.skipped
            continue
        if kind in ("append", "replay"):
            last_txn = len(history)
            info = write_delta(df, path, partition_by=["event_date"],
                               app_txn=AppTxn("model", last_txn))
            table = table + rows
            appended.append(list(rows))
        elif kind == "overwrite":
            info = write_delta(df, path, mode="overwrite", partition_by=["event_date"])
            table = list(rows)
            appended.append(None if history else list(rows))
        else:
            info = write_delta(df, path, mode="overwrite", partition_by=["event_date"],
                               replace_partitions={"event_date": sorted(days)})
            table = [r for r in table if r[1] not in days] + rows
            appended.append(None if history else list(rows))
        assert info.version == len(history) and info.rows == len(rows)
        history.append(list(table))

        got = [(r.id, r.event_date.isoformat(), r.s) for r in read_delta(spark, path).collect()]
        assert key(got) == key(table)
        other = [(r["id"], r["event_date"].isoformat(), r["s"])
                 for r in DeltaTable(path).to_pyarrow_table().to_pylist()]
        assert key(other) == key(table)

    for version, rows in enumerate(history):
        got = [(r.id, r.event_date.isoformat(), r.s)
               for r in read_delta(spark, path, version=version).collect()]
        assert key(got) == key(rows)
    if history and all(a is not None for a in appended):
        added = [r for a in appended[1:] for r in a or []]
        got = [(r.id, r.event_date.isoformat(), r.s) for r in read_changes(spark, path, 0).collect()]
        assert key(got) == key(added)
