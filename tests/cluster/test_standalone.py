"""A subset of the suite, the demo's pipeline included, against a standalone master
(spark://127.0.0.1) whose one worker runs the executors: the engine's jar and Python code must
reach them, and the lake (a local path, the same machine) must be where the driver and the
executors both look."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.harness import Standalone, wait_until
from tests.cluster.runs import assert_subset_passed, run_subset, timings

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

APP = "temporal-joins"


def _finished_apps(cluster: Standalone) -> set[str]:
    return {a["id"] for a in cluster.apps(APP) if a.get("state") == "FINISHED"}


def test_subset_on_the_standalone_master(standalone: Standalone, tmp_path: Path) -> None:
    before = _finished_apps(standalone)
    run, results = run_subset({"TJ_SPARK_MASTER": standalone.url,
                               "TJ_CLUSTER_WORK_DIR": str(standalone.work_dir)}, tmp_path)
    print(f"subset against {standalone.url}: {timings(run, results)}")
    assert_subset_passed(run, results, allowed_skips=("Spark Connect only",), at_least=14)
    # It ran on the cluster: one more finished application, whose tasks the worker's executors ran.
    # The master may list it a moment after the driver has gone (and answers slowly under load).
    new = wait_until("the subset's application listed as finished by the master",
                     lambda: _finished_apps(standalone) - before,
                     [standalone.master, standalone.worker], timeout_s=120)
    assert len(new) == 1, f"the master saw applications {new} finish"
    assert standalone.executor_logs(new.pop()), "no executor of the worker ran the subset's tasks"
