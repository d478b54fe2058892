"""The suite's own timing report and its scheduling order (tests/timings.py,
tests/scheduling.py): what CI's log ends with, and what decides which worker runs what."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests import scheduling, timings


def run_data(seconds: dict[str, float], groups: dict[str, str] | None = None) -> dict[str, Any]:
    return {"tests": seconds, "wall_s": 120.0, "workers": 2, "load": [2.0, 4.0], "cpus": 2,
            "outcomes": dict.fromkeys(seconds, "passed"), "groups": groups or {}}


def test_the_report_names_the_slowest_tests_files_and_directories() -> None:
    data = run_data({"suite/spark/test_a.py::t1": 30.0, "suite/spark/test_a.py::t2": 10.0,
                     "suite/lake/test_b.py::t": 5.0})
    text = timings.report(data, slowest=2)
    assert text.startswith("== where the time went: 3 tests, 45 s of test time on 2 worker(s), "
                           "120 s wall (2.0 min); outcomes 3 passed")
    assert "load average (1 min, every 5 s): mean 3.0, max 4.0, on 2 cpus" in text
    slowest = text.split("-- the 2 slowest tests")[1].split("-- the 20 slowest files")[0]
    assert "suite/spark/test_a.py::t1" in slowest and "suite/lake/test_b.py::t" not in slowest
    per_directory = text.split("-- per directory")[1]
    assert "\n40    89%      2  suite/spark\n 5    11%      1  suite/lake" in per_directory


def test_groups_without_a_figure_are_named_once_they_cost_more_than_assumed() -> None:
    data = run_data({"suite/spark/test_new.py::a": 20.0, "suite/spark/test_new.py::b": 16.0,
                     "suite/spark/test_small.py::a": 3.0, "suite/spark/test_known.py::a": 50.0,
                     "suite/lake/test_shared.py::a": 14.0},
                    groups={"suite/lake/test_shared.py::a": "two-processes"})
    known = {"suite/spark/test_known.py": 45.0}
    # test_new.py: 36 s against 2 s assumed; test_small.py 3 s against 1 (not worth saying);
    # a named group counts under its name.
    assert timings.unscheduled(data, known) == [("suite/spark/test_new.py", 36.0),
                                                ("two-processes", 14.0)]
    assert timings.unscheduled(data, {**known, "suite/spark/test_new.py": 1.0,
                                      "two-processes": 9.0}) == []


def test_the_saved_durations_are_what_the_report_warns_about(tmp_path: Any, monkeypatch: Any) -> None:
    data = run_data({"suite/spark/test_new.py::a": 36.0})
    monkeypatch.setattr(timings, "known_seconds", lambda: {})
    text = timings.report(data)
    assert "1 scheduling group(s) without a figure" in text
    # CI's output still ends with the per-directory totals.
    assert text.splitlines()[-2:] == [" s  share  tests  directory", "36   100%      1  suite/spark"]
    assert timings.group_seconds(data) == {"suite/spark/test_new.py": 36.0}
    monkeypatch.setattr(timings, "known_seconds", lambda: timings.group_seconds(data))
    assert "without a figure" not in timings.report(data)
    # A run in one process (the cluster subset's) is not scheduled by the figures.
    monkeypatch.setattr(timings, "known_seconds", lambda: {})
    assert "without a figure" not in timings.report({**data, "workers": 0})


def test_groups_go_out_longest_first_and_a_group_stays_together(monkeypatch: Any) -> None:
    ids = ["suite/a.py::1", "suite/b.py::1", "tests/lake/test_concurrent_writes.py::1",
           "suite/b.py::2", "tests/spark/test_one_writer.py::1", "suite/c.py::1"]
    items = [SimpleNamespace(nodeid=n) for n in ids]
    # c.py is unknown: one second a test.
    monkeypatch.setattr(scheduling, "known_seconds",
                        lambda: {"suite/a.py": 5.0, "suite/b.py": 50.0, "two-processes": 20.0})
    scheduling.order_groups(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "suite/b.py::1", "suite/b.py::2",
        "tests/lake/test_concurrent_writes.py::1", "tests/spark/test_one_writer.py::1",
        "suite/a.py::1", "suite/c.py::1"]


def test_idle_seconds_go_to_the_files_that_ran_meanwhile() -> None:
    from tests import idle

    data = run_data({"suite/a.py::t": 10.0, "suite/b.py::t": 10.0, "suite/b.py::u": 1.0})
    # a.py runs 0-10, b.py 5-12: the sample ending at 5 (from 0) is a.py's alone, the one ending
    # at 10 is shared, the one ending at 15 is b.py's alone; none runs in the last.
    data["spans"] = {"suite/a.py::t": [0.0, 10.0], "suite/b.py::t": [5.0, 11.0],
                     "suite/b.py::u": [11.0, 12.0]}
    data["idle"] = [[0.0, 0.0], [5.0, 2.0], [10.0, 4.0], [15.0, 1.0], [20.0, 3.0]]
    assert idle.idle_by_file(data) == {"suite/a.py": 4.0, "suite/b.py": 3.0, "(between tests)": 3.0}
    lines = idle.report(data)
    assert lines[0] == "   idle cores: 10 of 240 CPU-seconds (4 %); the files running meanwhile:"
    assert lines[1:] == ["        4 s  suite/a.py", "        3 s  suite/b.py",
                         "        3 s  (between tests)"]
    assert idle.report(run_data({})) == []
