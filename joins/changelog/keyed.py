"""Keyed state of a table-result operator: an append-only Delta log, one row per key per batch
that changed it, read as "the row of the largest batch per key".

A micro-batch touches a few thousand keys; the state may hold millions. So a batch reads only
its own keys: they are broadcast into the state scan (a left-semi broadcast hash join in the
scan tasks, no shuffle of the state), and only the surviving rows are reduced to one per key.
Every `COMPACT_EVERY` batches the log is rewritten as one row per key (`compact_keyed_state`),
content-preserving, so reads stay one row per key plus the batches since.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from joins import lake

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

STATE_BATCH = "_batch_id"
_WIN = "_latest"


def latest_per_key(rows: DataFrame, key: str) -> DataFrame:
    """One row per key: the one of the largest STATE_BATCH (an aggregate: partial aggregation
    first, so a key with many rows never lands whole on one task)."""
    from pyspark.sql import functions as F

    payload = [c for c in rows.columns if c != key]
    return (rows.groupBy(key).agg(F.max_by(F.struct(*payload), F.col(STATE_BATCH)).alias(_WIN))
            .select(key, *(F.col(f"{_WIN}.{c}").alias(c) for c in payload)))


def keyed_state(state: DataFrame | None, keys: DataFrame, key: str, *,
                keys_key: str | None = None) -> DataFrame | None:
    """The current state row of each key in `keys` that has one (None: no state yet)."""
    from pyspark.sql import functions as F

    if state is None:
        return None
    probe = keys.select(F.col(keys_key or key).alias("_probe_key"))
    wanted = state.join(F.broadcast(probe), state[key] == probe["_probe_key"], "left_semi")
    return latest_per_key(wanted, key)


def compact_keyed_state(spark: SparkSession, path: str, key: str, *, app: str,
                        keep: Column | None = None) -> int | None:
    """Rewrite the state log at `path` as one row per key (only rows where `keep` holds).
    Version-guarded: a batch that committed meanwhile makes it give up (the next one runs)."""
    version = lake.delta_version(path)
    if version is None:
        return None
    current = latest_per_key(lake.read_delta(spark, path, version=version), key)
    if keep is not None:
        current = current.where(keep)
    with contextlib.suppress(lake.ConcurrentCommitError):
        return lake.write_delta(current, path, mode="overwrite", expected_version=version,
                                commit_message=f"{app}: compact keyed state of version {version}").version
    return None
