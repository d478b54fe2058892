"""The same subset through Spark Connect (sc://127.0.0.1), the server started from pyspark's own
sbin/start-connect-server.sh and running its sessions on the standalone master. What needs a JVM
in the client process is refused clearly or falls back (README, "Running on a cluster"); the
subset's skips must be exactly those."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.harness import ConnectServer, Standalone
from tests.cluster.runs import assert_subset_passed, run_subset, timings

pytestmark = [pytest.mark.connect, pytest.mark.slow]

CONNECT_SKIPS = ("this run is Spark Connect", "classic sessions only")


def test_subset_through_connect(connect_server: ConnectServer, standalone: Standalone,
                                tmp_path: Path) -> None:
    run, results = run_subset({"TJ_SPARK_REMOTE": connect_server.url,
                               "TJ_CLUSTER_WORK_DIR": str(standalone.work_dir)}, tmp_path)
    print(f"subset through {connect_server.url}: {timings(run, results)}")
    assert_subset_passed(run, results, allowed_skips=CONNECT_SKIPS, at_least=12)
