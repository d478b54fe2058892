"""The floor of the stream-table micro-batch benchmark (bench/incremental_step.py): the least a
micro-batch must do, written by hand the way a competent engineer would write the job with
plain PySpark and delta-spark, without any of the project's code.

Per batch: read the stream's rows added by the Delta commits since the last batch (the add
actions of those commits' log entries), read the versioned table (`format("delta")`) keeping
only the versions of the batch's keys (a broadcast semi-join), pick each event's version as of
its ts with a window (newest version at or before the event; a tombstone answers null), and
append the result with `df.write.format("delta")`, from the executors, as the runtime writes.

What it leaves out, and the runtime adds: the grace buffer (every event is answered at once),
the batch log, the writer lease, idempotent commits, history retention (no event here is
older than the retention), duplicate checks, metrics. What it does not keep between batches:
any of the table's rows; each batch scans the table's key, ts, tombstone and rate columns,
since the table's layout (files by event day, keys random) lets no reader skip a file by key.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EVENTS = "key long, amount double, ts long, _seq long, event_date date"


def added_files(path: str, after: int, upto: int) -> list[str]:
    """The data files added by commits (after, upto] of the Delta table at `path`."""
    files = []
    for version in range(after + 1, upto + 1):
        log = Path(path) / "_delta_log" / f"{version:020d}.json"
        for line in log.read_text().splitlines():
            add = json.loads(line).get("add")
            if add is not None:
                files.append(str(Path(path) / unquote(add["path"])))
    return files


def _rows_of_last_commit(path: str) -> int:
    """Rows the table's last commit added, from its add actions' statistics (after the timing)."""
    from deltalake import DeltaTable

    version = DeltaTable(path).version()
    log = Path(path) / "_delta_log" / f"{version:020d}.json"
    rows = 0
    for line in log.read_text().splitlines():
        add = json.loads(line).get("add")
        if add is not None and add.get("stats"):
            rows += int(json.loads(add["stats"]).get("numRecords", 0))
    return rows


@dataclass
class FloorJob:
    """One hand-written micro-batch job: `stream` joined as of with `table`, appended to `out`."""

    spark: SparkSession
    stream: str
    table: str
    out: str
    done: int = -1  # the last stream version read

    def batch(self) -> tuple[float, int]:
        """Run one batch: (seconds, rows written)."""
        from deltalake import DeltaTable

        started = time.perf_counter()
        last = DeltaTable(self.stream).version()
        files = added_files(self.stream, self.done, last)
        events = self.spark.read.option("basePath", self.stream).schema(EVENTS).parquet(*files)
        versions = self.spark.read.format("delta").load(self.table) \
            .select("key", "rate", "ts", "tombstone")
        answer = self.answer(events, versions)
        answer.write.format("delta").mode("append").partitionBy("event_date").save(self.out)
        self.done = last
        elapsed = time.perf_counter() - started
        return elapsed, _rows_of_last_commit(self.out)

    @staticmethod
    def answer(events: DataFrame, versions: DataFrame) -> DataFrame:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = events.select("key").distinct()
        mine = (versions.join(F.broadcast(keys), "key", "left_semi")
                .select(F.col("key").alias("vkey"), F.col("ts").alias("table_valid_from"),
                        "rate", "tombstone"))
        on = (F.col("key") == F.col("vkey")) & (F.col("table_valid_from") <= F.col("ts"))
        newest = Window.partitionBy("_seq").orderBy(F.col("table_valid_from").desc())
        picked = (events.join(mine, on, "left").withColumn("_n", F.row_number().over(newest))
                  .where(F.col("_n") == 1))
        live = F.coalesce(~F.col("tombstone"), F.lit(False))
        return picked.select("key", "amount", "ts", "event_date", "_seq",
                             F.when(live, F.col("rate")).alias("rate"),
                             F.when(live, F.col("table_valid_from")).alias("table_valid_from"))
