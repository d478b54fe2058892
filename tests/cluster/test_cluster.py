"""A subset of the suite, the demo's pipeline included, on a real cluster: against a standalone
master (spark://127.0.0.1) whose one worker runs the executors, then through Spark Connect
(sc://127.0.0.1), the server started with pyspark's own bin/spark-submit and running
its sessions on that master.

On the master, the engine's jar and Python code must reach the executors, and the lake (a local
path, the same machine) must be where the driver and the executors both look. Through Connect,
what needs a JVM in the client process is refused clearly or falls back (docs/cluster.md); the
subset's skips must be exactly those.

One module: the tests share the cluster, and pytest-xdist gives a module to one worker."""

from __future__ import annotations

import pytest

from tests.cluster.harness import ConnectServer, Standalone, wait_until
from tests.cluster.runs import assert_subset_passed, run_subset, timings

APP = "temporal-joins"
CONNECT_SKIPS = ("this run is Spark Connect", "classic sessions only")


def _finished_apps(cluster: Standalone) -> set[str]:
    return {a["id"] for a in cluster.apps(APP) if a.get("state") == "FINISHED"}


@pytest.mark.cluster
@pytest.mark.slow
def test_subset_on_the_standalone_master(standalone: Standalone) -> None:
    before = _finished_apps(standalone)
    run, results = run_subset({"TJ_SPARK_MASTER": standalone.url,
                               "TJ_CLUSTER_WORK_DIR": str(standalone.work_dir)}, "standalone")
    print(f"subset against {standalone.url}: {timings(run, results)}")
    assert_subset_passed(run, results, allowed_skips=("Spark Connect only",), at_least=14)
    # It ran on the cluster: one more finished application, whose tasks the worker's executors ran.
    # The master may list it a moment after the driver has gone (and answers slowly under load).
    new = wait_until("the subset's application listed as finished by the master",
                     lambda: _finished_apps(standalone) - before,
                     [standalone.master, standalone.worker], timeout_s=120)
    assert len(new) == 1, f"the master saw applications {new} finish"
    assert standalone.executor_logs(new.pop()), "no executor of the worker ran the subset's tasks"


@pytest.mark.connect
@pytest.mark.slow
def test_subset_through_connect(connect_server: ConnectServer, standalone: Standalone) -> None:
    run, results = run_subset({"TJ_SPARK_REMOTE": connect_server.url,
                               "TJ_CLUSTER_WORK_DIR": str(standalone.work_dir)}, "connect")
    print(f"subset through {connect_server.url}: {timings(run, results)}")
    assert_subset_passed(run, results, allowed_skips=CONNECT_SKIPS, at_least=12)
    # The server's own sessions write files too: its Hadoop configurations are as lean as a
    # classic session's (temporaljoins.HadoopDefaults, called when the server loads TxnPlugin).
    log = connect_server.daemon.log.read_text(errors="replace")
    assert "Hadoop configurations without [mapred-default.xml, yarn-default.xml]" in log, (
        "the Connect server kept YARN's and MapReduce's defaults:\n" + connect_server.daemon.tail())
