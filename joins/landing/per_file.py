"""Landing files judged in Spark tasks, a file a task, in one job: the checks that must not run
in the session's JVM or on the driver (a line or a row too large to hold) run in Python workers,
where the files are."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession


def refused_files(spark: SparkSession, rows: Sequence[tuple[Any, ...]], ddl: str,
                  problem: Callable[..., str | None]) -> dict[str, str]:
    """{path: problem} of the `rows` (a file's path first, then the rest of `problem`'s
    arguments, typed by the Spark DDL `ddl`) whose `problem` is not None; no job without rows."""
    if not rows:
        return {}
    listing = spark.createDataFrame(list(rows), ddl)
    names = listing.columns

    def judge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            refused = [(values[0], found) for values in
                       zip(*(batch.column(n).to_pylist() for n in names), strict=True)
                       if (found := problem(*values)) is not None]
            if refused:
                paths, problems = zip(*refused, strict=True)
                yield pa.RecordBatch.from_pydict({"path": list(paths), "problem": list(problems)})

    found = listing.repartition(min(len(rows), 256)).mapInArrow(
        judge, "path string, problem string").collect()   # one row a refused file
    return {r["path"]: r["problem"] for r in found}
