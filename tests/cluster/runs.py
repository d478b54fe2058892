"""What tests/cluster runs against a cluster: a small subset of the suite (the demo's pipeline
included) in a fresh Python process whose one SparkSession is the cluster's (a process hosts one
session, and the suite's own is local), judged test by test from its JUnit report."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.harness import REPO, Daemon, python_env

# Small on purpose (CI's budget): the engine's paths that a cluster changes. The in-session
# checks (where tasks run, the demo's pipeline, the JVM index or its refusal), the incremental
# runtime (Observation, localCheckpoint, Delta commits of files the executors wrote), a scenario
# replayed in batches, the foreign-key join (the one join the demo does not run) on a scenario,
# the as-of join's strategies and the caller's cache, a Delta round trip, the delta-spark writer
# (through Connect its transactions run in the server's TxnPlugin).
SUBSET = [
    "tests/cluster/session_checks.py",
    "tests/spark/test_stream_table_incremental.py::test_report_of_a_batch",
    "tests/spark/test_stream_table_incremental.py::test_every_stream_table_scenario_on_spark"
    "[001_late_join]",
    "tests/spark/test_fk_join_incremental.py::test_every_fk_join_scenario_on_spark"
    "[004_stale_hash_record_at_a_time]",
    "tests/spark/test_asof_join.py::test_equal_ts_before_first_and_tombstone",
    "tests/spark/test_asof_join.py::test_callers_cached_inputs_stay_cached",
    "tests/lake/test_write_read.py::test_create_append_and_read_back_with_three_readers",
    "tests/spark/test_txn_writer.py",
]
TIMEOUT_S = 1500


@dataclass
class Outcome:
    name: str
    status: str          # passed / skipped / failed
    seconds: float
    message: str = ""


@dataclass
class Run:
    returncode: int
    seconds: float
    log: Path

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _run(cmd: list[str], env: dict[str, str], log: Path) -> Run:
    """`cmd` in its own process group (its driver JVM and Python workers with it); on a timeout
    or an interrupt the whole group is stopped before this returns or raises."""
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    child = Daemon("subset", proc, log)
    try:
        returncode = proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.stop()
        raise AssertionError(f"the subset ran over {TIMEOUT_S} s; stopped:\n{child.tail()}") from None
    finally:
        child.stop()  # the group may outlive its leader; a no-op once all of it has exited
    return Run(returncode, time.monotonic() - started, log)


def run_subset(spark_env: dict[str, str], name: str) -> tuple[Run, list[Outcome]]:
    """SUBSET in one pytest process; the outcome of every test from the JUnit report. Its log,
    report and timings stay in the run's results folder, `cluster/<name>/`, after the run (a
    slow cluster run is read there: `python -m tests.timings <folder>/timings.json`)."""
    from tests.timings import results_dir

    base = results_dir() / "cluster" / name
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    report = base / "junit.xml"
    env = python_env(**spark_env, TJ_TEST_RESULTS=str(base))
    run = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                f"--junitxml={report}", *SUBSET], env, base / "subset.log")
    if not report.exists():
        raise AssertionError(f"the subset wrote no report (exit {run.returncode}):\n{run.tail()}")
    return run, outcomes(report)


def outcomes(report: Path) -> list[Outcome]:
    out = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        status, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                status = "skipped" if tag == "skipped" else "failed"
                message = (found.get("message") or "") + "\n" + (found.text or "")
                break
        out.append(Outcome(name, status, float(case.get("time") or 0), message.strip()))
    return out


def assert_subset_passed(run: Run, results: list[Outcome], *, allowed_skips: tuple[str, ...],
                         at_least: int) -> None:
    """Every test passed, or was skipped for one of the expected reasons; enough of them ran."""
    failed = [r for r in results if r.status == "failed"]
    assert not failed, "\n\n".join(f"{r.name}:\n{r.message[-3000:]}" for r in failed)
    unexpected = [r for r in results if r.status == "skipped"
                  and not any(reason in r.message for reason in allowed_skips)]
    assert not unexpected, "unexpected skips: " + "; ".join(f"{r.name}: {r.message}" for r in unexpected)
    passed = [r.name for r in results if r.status == "passed"]
    assert len(passed) >= at_least, f"only {len(passed)} tests passed: {passed}\n{run.tail()}"
    assert run.returncode == 0, run.tail()


def timings(run: Run, results: list[Outcome]) -> str:
    """The run's wall time and its slowest tests, for the log."""
    slowest = sorted(results, key=lambda r: -r.seconds)[:5]
    return f"{run.seconds:.0f} s ({run.log.parent}); slowest: " + ", ".join(
        f"{r.name.rsplit('::', 1)[-1]} {r.seconds:.0f} s" for r in slowest)
