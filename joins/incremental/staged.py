"""One table's write of a batch, staged (files written, not committed) and then committed: the
runtime stages every table of a batch side by side and commits them one by one in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from joins import lake
from joins.asof import input_errors
from joins.incremental.contract import TableOutcome, Written


@dataclass
class Staged:
    """One table's write of a batch, its files in place but not committed, and the metrics
    observed while Spark wrote them (or computed, if a crashed run had committed it)."""

    write: lake.StagedWrite
    txn: lake.AppTxn
    metrics: dict[str, Any]

    def commit(self, path: str) -> TableOutcome:
        # Through write_delta: the commit points are its calls (where crash tests inject).
        info = lake.write_delta(self.write, path)
        if info.skipped:
            # Committed by a run that crashed after it: what it added is in the log.
            info = lake.committed_write(path, self.txn) or info
        return TableOutcome(commit=info if info.files or info.version is not None else None,
                            metrics=self.metrics)


def stager(app: str, path: str, table: str, written: Written, batch_id: int, *, mode: str,
            partition_by: list[str], into: dict[str, Staged], add_columns: bool = False,
            properties: dict[str, str] | None = None) -> Callable[[], None]:
    """Stage one idempotent write, with the frame's metrics observed while Spark writes it.
    `add_columns`: columns the table lacks are added (nullable) rather than refused.
    `properties`: the table's Delta properties, if this write creates it."""
    from pyspark.sql import Observation

    def stage() -> None:
        txn = lake.AppTxn(f"{app}.{table}", batch_id)
        observation = Observation(f"{app}_{table}_{batch_id}") if written.metrics else None
        source = written.source
        if observation is not None:
            source = source.observe(observation, *(e.alias(n) for n, e in written.metrics.items()))
        frame = written.frame(source)
        # A bad input record found inside Spark (a duplicate version, a null ts) surfaces here,
        # in the action that runs the step's plan: as the engine's InputRecordError, naming it.
        with input_errors():
            # exclusive: a writer paused past its lease fails at its commit once its successor
            # fenced it.
            write = lake.stage_delta(frame, path, mode=mode,  # type: ignore[arg-type]
                                     partition_by=partition_by or None, app_txn=txn,
                                     commit_message=f"{app}: {table} of batch {batch_id}",
                                     skip_empty=mode == "append", exclusive=True,
                                     configuration=properties,
                                     schema_mode="merge" if add_columns else "enforce")
        metrics: dict[str, Any] = {}
        if write.answer is not None and write.answer.skipped:
            # No Spark job ran: the metrics are computed from the same (pinned) rows, so the
            # report is the one the crashed run would have written.
            if written.metrics:
                row = written.source.agg(*(e.alias(n) for n, e in written.metrics.items())).first()
                metrics = {} if row is None else row.asDict()
        elif observation is not None:
            metrics = dict(observation.get)
        into[table] = Staged(write, txn, metrics)

    return stage
