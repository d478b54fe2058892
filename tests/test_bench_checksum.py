"""The benchmarks' content checksum (bench/checksum.py) is the same number in every engine that
computes it, and tells a join that pairs the wrong rows from the right one."""

from __future__ import annotations

import duckdb
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from bench.checksum import checksum_sql, pair_hash_polars, pair_hash_py

ids = st.integers(min_value=0, max_value=2**42)
pairs = st.lists(st.tuples(ids, st.none() | ids), max_size=50)


@given(pairs)
def test_duckdb_and_polars_agree_with_the_reference(rows: list[tuple[int, int | None]]) -> None:
    expected = (len(rows), sum(pair_hash_py(a, b) for a, b in rows))
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a BIGINT, b BIGINT)")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    n, total = con.execute(f"SELECT {checksum_sql('a', 'b')} FROM t").fetchone()  # type: ignore[misc]
    assert (n, int(total or 0)) == expected
    frame = pl.DataFrame(rows, schema={"a": pl.Int64, "b": pl.Int64}, orient="row")
    assert (frame.height, int(frame.select(pair_hash_polars("a", "b").sum()).item() or 0)) == expected


def test_the_same_ids_paired_otherwise_differ() -> None:
    right = [(1, 2), (3, 4)]
    crossed = [(1, 4), (3, 2)]
    assert sum(pair_hash_py(a, b) for a, b in right) != sum(pair_hash_py(a, b) for a, b in crossed)
    assert pair_hash_py(5, None) != pair_hash_py(5, 0)
