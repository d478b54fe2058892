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
from collections.abc import Sequence
from typing import TYPE_CHECKING

from joins import lake

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

STATE_BATCH = "_batch_id"
_WIN = "_latest"


def latest_per_key(rows: DataFrame, key: str | Sequence[str]) -> DataFrame:
    """One row per key (one column or several): the one of the largest STATE_BATCH (an
    aggregate: partial aggregation first, so a key with many rows never lands whole on one
    task)."""
    from pyspark.sql import functions as F

    keys = [key] if isinstance(key, str) else list(key)
    payload = [c for c in rows.columns if c not in keys]
    return (rows.groupBy(*keys).agg(F.max_by(F.struct(*payload), F.col(STATE_BATCH)).alias(_WIN))
            .select(*keys, *(F.col(f"{_WIN}.{c}").alias(c) for c in payload)))


def keyed_state(state: DataFrame | None, keys: DataFrame, key: str, *,
                keys_key: str | None = None,
                row_key: Sequence[str] | None = None) -> DataFrame | None:
    """The current state row of each key in `keys` that has one (None: no state yet).
    `row_key`: the state's rows are keyed by these columns, of which `key` is the one probed
    (a subscription store keyed by (foreign key, primary key), read by foreign key)."""
    from pyspark.sql import functions as F

    if state is None:
        return None
    probe = keys.select(F.col(keys_key or key).alias("_probe_key"))
    wanted = state.join(F.broadcast(probe), state[key] == probe["_probe_key"], "left_semi")
    return latest_per_key(wanted, key if row_key is None else row_key)


def compact_keyed_state(spark: SparkSession, path: str, key: str | Sequence[str], *, app: str,
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
