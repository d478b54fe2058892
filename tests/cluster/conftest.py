"""The cluster the tests of this folder share: a standalone master and worker, and a Spark
Connect server on them: the cluster is started once for the folder and stopped after its last
test, the Connect server for its module.

Without Java the folder is skipped, saying so; under CI (CI=true) it fails instead, since CI must
run it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from tests.cluster.harness import ConnectServer, Standalone, java_missing, start_connect, start_standalone


def _require_java() -> None:
    reason = java_missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason}; CI must run the cluster tests")
    pytest.skip(reason)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="package")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    _require_java()
    # A SIGTERM or SIGHUP (CI cancelling the job, a closed terminal) would end pytest without
    # teardown and leave the daemons running in their own process groups; as an interrupt,
    # pytest tears the fixtures down, which stops them.
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        cluster = start_standalone(tmp_path_factory.mktemp("standalone"))
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@pytest.fixture(scope="module")
def connect_server(standalone: Standalone, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[ConnectServer]:
    server = start_connect(tmp_path_factory.mktemp("connect"), standalone.url)
    try:
        yield server
    finally:
        server.stop()
