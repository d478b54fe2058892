"""An order-independent checksum of a join's result by content: the sum, over the output rows, of
a hash of the row's identity (left id, right id), computed the same way in every engine.

Row counts alone miss a join that pairs the wrong rows; comparing sorted id pairs across engines
would cost more than the joins. The hash is plain integer arithmetic modulo a 31-bit prime,
written once as SQL text that DuckDB and Spark SQL both run, and once for polars, so that no
engine's own hash function (they all differ) is involved. Every intermediate value stays below
2^62, so neither DuckDB's overflow check nor Spark's ANSI mode can trip, and the sum over a
billion rows stays below 2^62 too. Squaring makes the hash non-linear: a sum of a linear
combination of the ids would only check the sums of each side's ids, not which ids were paired.

A missing right id (an unmatched row of a left join) hashes as right id -1, so unmatched rows
count too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

PRIME = 2_147_483_647  # 2^31 - 1
MUL = 1_000_003
MIX = 48_271


def pair_hash_sql(left_id: str, right_id: str) -> str:
    """SQL for the hash of one row, for DuckDB and Spark SQL alike; ids are non-negative longs
    (the right one may be null)."""
    right = f"coalesce({right_id} + 1, 0)"
    mixed = f"((({left_id}) % {PRIME}) * {MUL} + ({right}) % {PRIME}) % {PRIME}"
    return f"((({mixed}) * ({mixed})) % {PRIME} * {MIX} + ({left_id}) % {PRIME}) % {PRIME}"


def checksum_sql(left_id: str, right_id: str) -> str:
    """`count(*), sum(hash)` as a SELECT list."""
    return f"count(*) AS n, sum({pair_hash_sql(left_id, right_id)}) AS checksum"


def pair_hash_polars(left_id: str, right_id: str) -> pl.Expr:
    import polars as pl

    left = pl.col(left_id).cast(pl.Int64)
    right = (pl.col(right_id).cast(pl.Int64) + 1).fill_null(0)
    mixed = ((left % PRIME) * MUL + right % PRIME) % PRIME
    return ((mixed * mixed) % PRIME * MIX + left % PRIME) % PRIME


def pair_hash_py(left_id: int, right_id: int | None) -> int:
    """The reference, for tests."""
    right = 0 if right_id is None else right_id + 1
    mixed = ((left_id % PRIME) * MUL + right % PRIME) % PRIME
    return ((mixed * mixed) % PRIME * MIX + left_id % PRIME) % PRIME


def spark_checksum(frame: Any, left_id: str, right_id: str) -> tuple[int, int]:
    """(rows, checksum) of a Spark DataFrame."""
    from pyspark.sql import functions as F

    row = frame.agg(F.expr("count(*)").alias("n"),
                    F.expr(f"sum({pair_hash_sql(left_id, right_id)})").alias("c")).first()
    return int(row["n"]), int(row["c"] or 0)
