"""How a frame is cut into tasks before it is written or materialized.

A micro-batch's frames are unions of many small branches (new rows, state rows, padded rows,
watermarks), each with partitions of its own: a write of a few rows ran 14 to 22 tasks and left
as many files, which every later batch opened again. Spark coalesces partitions only after a
shuffle (and only with AQE), never across a union's branches or a scan's files. So before a
write or a checkpoint the frame is coalesced (no shuffle) to the session's configured
parallelism, `spark.sql.shuffle.partitions`: a no-op for a frame with fewer partitions, at most
that many tasks and files otherwise, which is the parallelism the deployment asked for.

A frame whose last step is the caller's own `repartition` or `coalesce` keeps it: Spark would
fold a coalesce on top into the caller's (the outer one wins), so `df.coalesce(1)` written as one
file would come out as several.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_TASKS = 200   # Spark's own default of spark.sql.shuffle.partitions

# Up to this many rows, a frame several queries read is better checkpointed than cached: one job
# more, but every later query is planned from a leaf, so the analysis of a micro-batch's dozens
# of frames stays small. Measured warm in one process, alternating: the interval join at 5k a
# side 1.57-1.64 s a batch against 1.64-1.93 s cached; the foreign-key join's single-record batch
# 0.76-0.87 s against 0.89-1.02 s. A larger frame is cached as its first reader computes it (no
# pass of its own over the rows).
CHECKPOINT_MAX_ROWS = 100_000


def worth_checkpointing(rows: int | None) -> bool:
    """Whether a frame of `rows` rows (None: unknown) is materialized by `checkpointed` rather
    than cached."""
    return rows is not None and rows <= CHECKPOINT_MAX_ROWS


def write_tasks(spark: SparkSession) -> int:
    """The most tasks (and files) one write or checkpoint of a frame is cut into."""
    value = spark.conf.get("spark.sql.shuffle.partitions", None)
    return int(value) if value else DEFAULT_TASKS


def for_writing(df: DataFrame) -> DataFrame:
    """`df` in at most `write_tasks` partitions (a narrow coalesce: no shuffle), unless the
    caller chose its partitions last."""
    if _partitioned_by_caller(df):
        return df
    return df.coalesce(write_tasks(df.sparkSession))


def _partitioned_by_caller(df: DataFrame) -> bool:
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        # Spark Connect: the plan is the client's; its last relation says the same.
        plan = getattr(df, "_plan", None)
        return type(plan).__name__ in _REPARTITIONS
    return str(jdf.queryExecution().logical().nodeName()) in _REPARTITIONS


_REPARTITIONS = frozenset({"Repartition", "RepartitionByExpression"})


def checkpointed(df: DataFrame, *, eager: bool = True) -> DataFrame:
    """`df` materialized once (a local checkpoint) in at most `write_tasks` partitions.

    eager=False: by the first Spark job that reads it, its blocks kept for the later ones,
    instead of by a job of its own. Plans built on it still start from a leaf; a frame whose
    first reader is a job anyway (a write, a count) saves one job. Not for a frame whose
    observed metrics the caller waits for (nothing would run the observation)."""
    return for_writing(df).localCheckpoint(eager=eager)


def release_checkpoint(df: DataFrame) -> None:
    """Free the blocks of a frame `checkpointed` made, now rather than when the JVM's garbage
    collector finds its RDD unreferenced: a long-running process (a run worker, a sensor's
    loop) would otherwise hold many batches' checkpoints in its memory and on its disk."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return  # Spark Connect: the server frees a checkpoint when the client drops the frame
    plan = jdf.queryExecution().analyzed()
    if str(plan.nodeName()) == "LogicalRDD":
        plan.rdd().unpersist(False)


@dataclass
class SharedFrames:
    """A batch's frames that several later frames and writes read, each computed once: checkpointed
    lazily when the batch is small (`checkpoint`, from `worth_checkpointing`), so that every
    plan built on one is analysed from a leaf rather than from the whole plan under it; cached
    otherwise. Lazily, because each is first read by a later frame's job or by a write: a
    checkpoint job of its own would only add a job. `release` frees them all once the batch's
    writes are done."""

    checkpoint: bool
    frames: list[DataFrame] = field(default_factory=list)

    def keep(self, df: DataFrame) -> DataFrame:
        kept = checkpointed(df, eager=False) if self.checkpoint else df.persist()
        self.frames.append(kept)
        return kept

    def release(self) -> None:
        for df in self.frames:
            if self.checkpoint:
                release_checkpoint(df)
            else:
                df.unpersist()
        self.frames.clear()
