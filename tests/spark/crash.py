"""Crash injection shared by every operator's exactly-once tests (tests/spark/test_*_crash.py).

A clean run of the batch under test records its `write_delta` calls (the commit points, each
named by its target table); a crash is then injected in every gap between two of them (before
and after each, once per gap: `crash_points`), each case on a copy of the same prepared lake
(sources landed, earlier batches run), and the re-run must leave every table exactly as the
clean run did: no duplicate, no gap.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.incremental import BatchLog
from joins.incremental.contract import CHECKPOINTS


class InjectedCrash(RuntimeError):
    """The process 'dies' at a commit point."""


def counting(monkeypatch: pytest.MonkeyPatch, on_call: Callable[[int, str], str | None],
             on_return: Callable[[int], None] | None = None) -> None:
    """Route every write_delta through `on_call(index, table name)`, which may say 'before' or
    'after' to crash there; `on_return(index)` is called once the write returned."""
    real = lake.write_delta
    calls = {"n": 0}

    def wrapper(df: Any, path: Any, **kwargs: Any) -> Any:
        index = calls["n"]
        calls["n"] += 1
        name = Path(str(path)).name
        when = on_call(index, name)
        if when == "before":
            raise InjectedCrash(f"crash before write {index} ({name})")
        info = real(df, path, **kwargs)
        if on_return is not None:
            on_return(index)
        if when == "after":
            raise InjectedCrash(f"crash after write {index} ({name})")
        return info

    monkeypatch.setattr(lake, "write_delta", wrapper)


def crash_points(writes: Sequence[str]) -> list[tuple[int, str]]:
    """(index, when) of one crash per gap between two commits: before and after each write,
    except before a table's commit that directly follows another table's. The runtime commits
    the staged tables one after another, with only its failpoint and a read-only lease check
    between two (joins/incremental/runner.py), so a crash there leaves the lake a crash after the
    previous commit leaves, and one re-run is the same as the other; `run_clean` checks that
    the clean run's lake does not change between them. Before the first table's commit (after
    the batch log's plan, with every table's files staged) and before the done record (after
    the step has finished its report) other work runs: those are crashes of their own."""
    points: list[tuple[int, str]] = []
    for index, name in enumerate(writes):
        if index == 0 or CHECKPOINTS in (name, writes[index - 1]):
            points.append((index, "before"))
        points.append((index, "after"))
    return points


def files_of(root: Path) -> list[tuple[str, int, int]]:
    """Every file under `root`: (relative path, size, modification time in ns)."""
    stats = ((f, f.stat()) for f in root.rglob("*") if f.is_file())
    return sorted((str(f.relative_to(root)), st.st_size, st.st_mtime_ns) for f, st in stats)


def lake_state(spark: Any, tables: dict[str, str], log: str, app: str, *,
               report_without: Iterable[str] = ()) -> dict[str, Any]:
    """Everything a batch leaves behind, as comparable values: every row of `tables` (name ->
    path; all columns, lineage included; absent tables left out) and the last done record of
    the batch log at `log`, without the report's `report_without` keys (what a re-run that
    skips a landed write cannot know, such as commit versions)."""
    out: dict[str, Any] = {}
    for name, path in tables.items():
        if lake.table_exists(path):
            out[name] = sorted(tuple(str(v) for v in row)
                               for row in lake.read_delta(spark, path).collect())
    done = BatchLog(log, app).tail().last_done
    assert done is not None
    drop = set(report_without)
    report = {k: v for k, v in done.report.items() if k not in drop}
    out["done"] = repr((done.batch_id, sorted(done.consumed.items()),
                        sorted(done.carry.items()), sorted(report.items())))
    return out


def join_state(replay: Any, tables: Iterable[str], app: str, *,
               report_without: Iterable[str] = ()) -> dict[str, Any]:
    """`lake_state` of a replay whose tables and batch log lie under `replay.join_root`."""
    root = replay.join_root
    return lake_state(replay.spark, {name: f"{root}/{name}" for name in tables},
                      f"{root}/checkpoints", app, report_without=report_without)


@dataclass
class Prepared:
    """A lake whose next batch is the one under test, and what a clean run of it left.

    reopen: a replay over a copy of the lake (its directory). state: `lake_state` of a replay.
    writes: the target table of each write_delta call of the clean run, in order."""

    base: Path
    reopen: Callable[[Path], Any]
    state: Callable[[Any], dict[str, Any]]
    clean: dict[str, Any] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)

    def copy(self, dst: Path) -> Any:
        shutil.copytree(self.base, dst)
        return self.reopen(dst)


def run_clean(base: Path, reopen: Callable[[Path], Any],
              state: Callable[[Any], dict[str, Any]]) -> tuple[Prepared, Any]:
    """Run the batch under test once on a copy of `base`, recording its commit points; the
    prepared lake and the clean run's report (for the caller's own checks)."""
    prepared = Prepared(base, reopen, state)
    root = base.parent / "clean"
    clean = prepared.copy(root)
    before: list[list[tuple[str, int, int]]] = []  # the lake as each write is called
    after: list[list[tuple[str, int, int]]] = []  # and as it returns

    def record(_index: int, name: str) -> None:
        prepared.writes.append(name)
        before.append(files_of(root))

    with pytest.MonkeyPatch.context() as mp:
        counting(mp, record, lambda _index: after.append(files_of(root)))
        report = clean.run()
    prepared.clean = state(clean)
    points = crash_points(prepared.writes)
    for index, name in enumerate(prepared.writes):
        if (index, "before") not in points:
            assert before[index] == after[index - 1], (
                f"the lake changed between the commits of {prepared.writes[index - 1]} and "
                f"{name}: a crash there is a crash of its own (crash_points)")
    return prepared, report


def prepare_lake(tmp: Path, open_replay: Callable[[Path, bool], Any], first: Sequence[Any],
                 second: Sequence[Any], state: Callable[[Any], dict[str, Any]]) -> tuple[Prepared, Any]:
    """Land `first`, run it, land `second` (the batch under test) in a lake at `tmp / "base"`,
    then `run_clean`. `open_replay(directory, create)`: the operator's replay over a lake."""
    base = tmp / "base"
    replay = open_replay(base, True)
    replay.land(first)
    replay.run()
    replay.land(second)
    return run_clean(base, lambda dst: open_replay(dst, False), state)


def crash_and_rerun(prepared: Prepared, dst: Path, index: int, when: str) -> dict[str, Any]:
    """Crash the batch `when` its `index`-th write on a copy at `dst`, re-run it: the state."""
    replay = prepared.copy(dst)
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, lambda i, _name: when if i == index else None)
        with pytest.raises(InjectedCrash):
            replay.run()
    replay.run()  # the re-run after the crash: finishes (or finds finished) the same batch
    return prepared.state(replay)


def crash_at_every_commit_point(prepared: Prepared, tmp_path: Path, subtests: Any) -> None:
    for index, when in crash_points(prepared.writes):
        name = prepared.writes[index]
        with subtests.test(msg=f"crash {when} write {index} ({name})"):
            state = crash_and_rerun(prepared, tmp_path / f"{index}-{when}", index, when)
            assert state == prepared.clean
