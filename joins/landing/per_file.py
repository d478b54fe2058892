"""Landing files judged in Spark tasks, a file a task, in one job: the checks that must not run
in the session's JVM or on the driver (a line or a row too large to hold) run in Python workers,
where the files are. A read that fails for a reason that is not the file's content (the
store's or the machine's: `read_failures`) is raised on the driver as a `LandingReadError`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from joins.landing.read_failures import LandingReadError
from joins.spark.local_rows import local_rows

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession


def refused_files(spark: SparkSession, rows: Sequence[tuple[Any, ...]], ddl: str,
                  problem: Callable[..., str | None]) -> dict[str, str]:
    """{path: problem} of the `rows` (a file's path first, then the rest of `problem`'s
    arguments, typed by the Spark DDL `ddl`) whose `problem` is not None; no job without rows."""
    if not rows:
        return {}
    listing = local_rows(spark, list(rows), ddl)
    names = listing.columns

    def judge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            out: dict[str, list[Any]] = {"path": [], "problem": [], "failed": []}
            for values in zip(*(batch.column(n).to_pylist() for n in names), strict=True):
                try:
                    found, failed = problem(*values), False
                except LandingReadError as exc:   # told to the driver, which raises it
                    found, failed = exc.reason, True
                if found is not None:
                    for key, value in zip(out, (values[0], found, failed), strict=True):
                        out[key].append(value)
            if out["path"]:
                yield pa.RecordBatch.from_pydict(out)

    found = listing.repartition(min(len(rows), 256)).mapInArrow(
        judge, "path string, problem string, failed boolean").collect()   # a row a refused file
    for row in found:
        if row["failed"]:
            raise LandingReadError(row["path"], row["problem"])
    return {r["path"]: r["problem"] for r in found}
