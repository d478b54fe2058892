"""The live demo (`./tj demo --live`) in the browser: after it ran briefly, the landing sensor's
page shows its ticks and its cursor (the daemon of `dagster dev` evaluates it every few seconds
while the generator lands waves).

The live demo runs as a child process (its `dagster dev` in a process group of its own) on a
free loopback port with a temporary DAGSTER_HOME and lake; SIGTERM stops it, and it stops
`dagster dev`. Screenshots go to `var/screenshots/` (tests/dagster/browser.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.dagster.browser import (
    LOCATION,
    REPO,
    REPOSITORY,
    assert_shows,
    browser_page,
    require_browser,
    shot,
    skip_without_browser,
    text_after_load,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
skip_without_browser()

SENSOR = "orders_landing_sensor"
TICKS = """
query($s: SensorSelector!) {
  sensorOrError(sensorSelector: $s) {
    __typename
    ... on Sensor { sensorState { status ticks(limit: 20) { status cursor runIds } } }
  }
}"""


def _ticks(url: str) -> list[dict[str, Any]]:
    from runplatform.dagster_server import DagsterServer

    # The server object only for its GraphQL client: the live demo owns the process.
    server = DagsterServer(home=Path("/nonexistent"), port=int(url.rsplit(":", 1)[1]))
    data = server.graphql(TICKS, {"s": {"repositoryLocationName": LOCATION,
                                        "repositoryName": REPOSITORY, "sensorName": SENSOR}},
                          timeout=10)
    found = data["sensorOrError"]
    return found["sensorState"]["ticks"] if found["__typename"] == "Sensor" else []


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # The live demo stops its `dagster dev` (a process group of its own) on SIGTERM.
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_live_demo_sensor_page_shows_ticks_and_cursor(tmp_path: Path) -> None:
    require_browser()
    from runplatform.dagster_server import free_port

    home, root, log_path = tmp_path / "dagster_home", tmp_path / "lake", tmp_path / "live.log"
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO),
           "TJ_SHUFFLE_PARTITIONS": "2"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "demo.live_demo", "--root", str(root), "--port", str(port),
             "--interval", "3", "--waves", "3"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        ticks: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"live demo exited: {log_path.read_text()[-3000:]}"
            if "Dagster UI:" in log_path.read_text():
                with contextlib.suppress(OSError, RuntimeError):
                    ticks = _ticks(url)
                if any(t["cursor"] for t in ticks) and any(t["runIds"] for t in ticks):
                    break
            time.sleep(2)
        assert any(t["cursor"] for t in ticks), (ticks, log_path.read_text()[-3000:])
        requested = [t for t in ticks if t["runIds"]]
        assert requested, f"no tick of {SENSOR} requested an ingest run: {ticks}"

        with browser_page() as page:
            page.goto(f"{url}/locations/{LOCATION}/sensors/{SENSOR}", wait_until="domcontentloaded")
            # The cursor (the last landing file requested, and those not ingested yet) and the
            # ticks that requested runs.
            wanted = [SENSOR, "Cursor", "-orders.jsonl", "through", "run requested"]
            text = text_after_load(page, wanted, absent=("Loading ticks",), timeout_s=90)
            shot(page, "live_sensor")
            assert_shows(text, wanted, "the sensor page")
            page.goto(f"{url}/runs", wait_until="domcontentloaded")
            text = text_after_load(page, ["orders_ingest"], timeout_s=60)
            shot(page, "live_runs")
            assert_shows(text, ["orders_ingest"], "the runs page")
    finally:
        _stop(proc)
