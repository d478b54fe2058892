"""Where the suite's time goes, recorded on every run and printed at its end.

As a pytest plugin (tests/conftest.py loads it) the controlling process records each test's
seconds (setup + call + teardown, whichever xdist worker ran it), its outcome, the load average
every few seconds and the run's wall time, and writes them to
`var/test-results/timings.json` (TJ_TEST_RESULTS moves the folder) when the session ends.

As a command, `python -m tests.timings` prints that file: the slowest tests, the seconds per
directory and per file, the load average. `./tj test` runs it after pytest, so a CI log ends with
it. `--save-durations` writes the seconds of each scheduling group to `tests/durations.json`,
which orders the groups longest first (tests/scheduling.py).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests import idle
from tests.scheduling import UNKNOWN_S_PER_TEST, assumed_seconds, group_of_nodeid, known_seconds

REPO = Path(__file__).resolve().parents[1]
LOAD_EVERY_S = 5.0
SLOWEST = 30
# A group without a figure is scheduled as UNKNOWN_S_PER_TEST a test; one that took this much
# longer than that went out too late and may have kept a worker busy after the other finished.
MISSING_WORTH_SAYING_S = 10.0


def results_dir() -> Path:
    return Path(os.environ.get("TJ_TEST_RESULTS") or REPO / "var" / "test-results")


class Recorder:
    """Durations, outcomes and load samples of one session, in the controlling process."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.started = time.time()
        self.seconds: dict[str, float] = defaultdict(float)
        self.outcomes: dict[str, str] = {}
        self.groups: dict[str, str] = {}
        self.load: list[float] = []
        # Idle CPU-seconds of the whole machine between samples, and when each test ran: the
        # report names the files that ran while cores idled (tests/idle.py).
        self.idle: list[tuple[float, float]] = []
        self.spans: dict[str, list[float]] = {}
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, name="load-sampler", daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        last = idle.idle_seconds()
        if last is not None:
            self.idle.append((round(time.time(), 2), 0.0))   # where the first interval starts
        while not self._stop.is_set():
            self.load.append(round(os.getloadavg()[0], 2))
            self._stop.wait(LOAD_EVERY_S)
            now = idle.idle_seconds()
            if now is not None and last is not None:
                self.idle.append((round(time.time(), 2), round(now - last, 2)))
            last = now

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        self.groups[nodeid] = group_of_nodeid(nodeid)
        self.seconds[nodeid] += report.duration
        span = self.spans.setdefault(nodeid, [report.start, report.stop])
        span[0], span[1] = min(span[0], report.start), max(span[1], report.stop)
        # A failed setup or teardown is the test's outcome; a passed one is not.
        if report.outcome != "passed" or (report.when == "call" and nodeid not in self.outcomes):
            self.outcomes[nodeid] = report.outcome

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self._stop.set()
        out = results_dir()
        out.mkdir(parents=True, exist_ok=True)
        data = {"wall_s": round(time.time() - self.started, 1), "workers": self.workers,
                "exit_status": int(exitstatus), "load": self.load,
                "cpus": os.cpu_count(), "tests": {k: round(v, 3) for k, v in self.seconds.items()},
                "outcomes": self.outcomes, "groups": self.groups,
                "idle": self.idle,
                "spans": {k: [round(a, 2), round(b, 2)] for k, (a, b) in self.spans.items()}}
        (out / "timings.json").write_text(json.dumps(data, indent=1, sort_keys=True))


def install(config: pytest.Config) -> None:
    """Register the recorder in the controlling process (xdist workers have `workerinput`)."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    workers = getattr(config.option, "numprocesses", None) or 0
    config.pluginmanager.register(Recorder(int(workers)), "tj-timings")


# ---- the report ---------------------------------------------------------------------------------


def directory_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:-1]) or "."


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _table(rows: Iterable[tuple[Any, ...]], header: tuple[str, ...]) -> list[str]:
    rows = list(rows)
    cells = [header, *[tuple(str(c) for c in r) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = "  ".join(f"{{:>{w}}}" if i < len(header) - 1 else "{}" for i, w in enumerate(widths))
    return [line.format(*r) for r in cells]


def report(data: dict[str, Any], *, slowest: int = SLOWEST) -> str:
    tests: dict[str, float] = data["tests"]
    total = sum(tests.values())
    outcomes = Counter(data.get("outcomes", {}).values())
    lines = [f"== where the time went: {len(tests)} tests, {total:.0f} s of test time on "
             f"{data.get('workers') or 1} worker(s), {data['wall_s']:.0f} s wall "
             f"({data['wall_s'] / 60:.1f} min); outcomes "
             + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))]
    load = data.get("load") or []
    if load:
        lines.append(f"   load average (1 min, every {LOAD_EVERY_S:.0f} s): mean "
                     f"{sum(load) / len(load):.1f}, max {max(load):.1f}, on {data.get('cpus')} cpus")
    lines += idle.report(data)
    # Before the tables: the output still ends with the per-directory totals. Only xdist's
    # workers are scheduled by the figures (the cluster subset's own run, in one process, is not).
    missing = unscheduled(data, known_seconds()) if (data.get("workers") or 0) > 1 else []
    if missing:
        lines.append(f"-- {len(missing)} scheduling group(s) without a figure in tests/durations.json, "
                     f"sent out last as {UNKNOWN_S_PER_TEST:.0f} s a test; after a full run, "
                     "`python -m tests.timings --save-durations` records them: "
                     + ", ".join(f"{g} {s:.0f} s" for g, s in missing))
    lines.append(f"-- the {slowest} slowest tests (setup + call + teardown, seconds)")
    ranked = sorted(tests.items(), key=lambda kv: -kv[1])[:slowest]
    lines += _table(((f"{s:.1f}", n) for n, s in ranked), ("s", "test"))
    for title, key in (("file", file_of), ("directory", directory_of)):
        sums: dict[str, float] = defaultdict(float)
        counts: Counter[str] = Counter()
        for nodeid, s in tests.items():
            sums[key(nodeid)] += s
            counts[key(nodeid)] += 1
        ranked_groups = sorted(sums.items(), key=lambda kv: -kv[1])
        if title == "file":
            ranked_groups = ranked_groups[:20]
            lines.append("-- the 20 slowest files")
        else:
            lines.append("-- per directory")
        lines += _table(((f"{s:.0f}", f"{100 * s / total:.0f}%" if total else "-", counts[g], g)
                         for g, s in ranked_groups), ("s", "share", "tests", title))
    return "\n".join(lines)


def unscheduled(data: dict[str, Any], known: dict[str, float]) -> list[tuple[str, float]]:
    """The groups of this run that `known` has no seconds for and that took
    MISSING_WORTH_SAYING_S longer than the scheduler assumed, longest first."""
    tests = Counter(_group(data, n) for n in data["tests"])
    return sorted(((g, s) for g, s in group_seconds(data).items()
                   if g not in known
                   and s - assumed_seconds(known, g, tests[g]) >= MISSING_WORTH_SAYING_S),
                  key=lambda gs: -gs[1])


def _group(data: dict[str, Any], nodeid: str) -> str:
    return data.get("groups", {}).get(nodeid) or file_of(nodeid)


def group_seconds(data: dict[str, Any]) -> dict[str, float]:
    """Seconds per scheduling group (tests/scheduling.py)."""
    out: dict[str, float] = defaultdict(float)
    for nodeid, s in data["tests"].items():
        out[_group(data, nodeid)] += s
    return {g: round(s, 1) for g, s in sorted(out.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.timings", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default=None, help="timings.json (default: the last run's)")
    parser.add_argument("--slowest", type=int, default=SLOWEST)
    parser.add_argument("--save-durations", action="store_true",
                        help="write each scheduling group's seconds to tests/durations.json")
    args = parser.parse_args(argv)
    path = Path(args.path) if args.path else results_dir() / "timings.json"
    if not path.exists():
        print(f"no timings at {path} (a pytest run writes them)")
        return 1
    data = json.loads(path.read_text())
    print(report(data, slowest=args.slowest))
    if args.save_durations:
        from tests.scheduling import DURATIONS

        DURATIONS.write_text(json.dumps(group_seconds(data), indent=1, sort_keys=True) + "\n")
        print(f"wrote {DURATIONS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
