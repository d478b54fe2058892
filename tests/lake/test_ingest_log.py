"""A source's ingest batch log (`joins.ingest.log`): the runtime's batch log holding which files
each batch took, read and written by delta-rs alone (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from joins.incremental.log import COMPACT_EVERY
from joins.ingest.log import IngestLog, PlannedBatch, PlannedFile
from joins.versioned.batches import IngestStateError


def test_plan_done_and_what_a_run_finds(tmp_path: Path) -> None:
    log = IngestLog(str(tmp_path / "log"), source_id="s")
    assert log.state().next_id == 0 and log.state().pending is None
    first = PlannedBatch(0, (PlannedFile("a.csv"), PlannedFile("b.csv", "a symbolic link")))
    log.plan(first, landing="/landing")
    state = log.state()
    assert (state.pending, state.next_id) == (first, 1)       # planned, not done: resumed first
    assert (state.taken, state.quarantined) == ({"a.csv", "b.csv"}, {"b.csv"})
    log.done(0, {"stored": 1})
    assert log.state().pending is None and log.state().next_id == 1
    with pytest.raises(IngestStateError, match="batch 0 was planned by another ingest run"):
        log.plan(PlannedBatch(0, (PlannedFile("c.csv"),)))
    assert log.state().taken == {"a.csv", "b.csv"}            # the refused plan took nothing


def test_the_log_is_compacted_as_a_joins_log_is(tmp_path: Path) -> None:
    path = str(tmp_path / "log")
    log = IngestLog(path, source_id="s")
    for b in range(COMPACT_EVERY):
        log.plan(PlannedBatch(b, (PlannedFile(f"{b:04d}.csv"),)))
        log.done(b, {})
    assert len(DeltaTable(path).file_uris()) == 1
    state = log.state()
    assert (state.pending, state.next_id, len(state.taken)) == (None, COMPACT_EVERY, COMPACT_EVERY)
