"""The Dagster UI shows the assets, their lineage, the join's latest materialization and its metadata.

The demo's pipeline runs (tiny data) into a temporary DAGSTER_HOME and lake; `dagster-webserver`
serves them on a free loopback port (own process group, killed at teardown); headless Chromium
(Debian's, through Playwright: `playwright install` cannot download here) opens the global asset
lineage and the join asset's page.

Outside CI the test is skipped when /usr/bin/chromium is missing; with CI=true it fails instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TJ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
JOIN = "orders_with_rates"
# The demo's second pipeline: the primary-key table-table join and the count on top of it.
TABLE_JOIN, COUNT = "customer_accounts", "accounts_per_country"
SCREENSHOTS = Path(os.environ.get("TJ_SCREENSHOT_DIR", "/tmp/tj-ui-screenshots"))


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _missing_browser() -> str | None:
    """Why the browser test cannot run here (None: it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not os.path.exists(CHROMIUM):
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set TJ_CHROMIUM)"
    return None


# Decided at collection, before any fixture starts Spark: outside CI a missing browser skips with
# the reason; in CI the test must run, so it fails instead (in `dagster_home`).
if _missing_browser() and not _in_ci():
    pytest.skip(str(_missing_browser()), allow_module_level=True)


def _require_browser() -> None:
    reason = _missing_browser()
    if reason:
        pytest.fail(f"{reason}; CI must run the browser test")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def dagster_home(spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Run the demo pipeline on tiny data; yields (DAGSTER_HOME, lake root)."""
    _require_browser()
    import dagster as dg

    from pipelines.demo import run
    from pipelines.sample_data import HOUR_MS, SampleConfig

    base = tmp_path_factory.mktemp("ui")
    home, root = base / "dagster_home", base / "lake"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    sample = SampleConfig(days=2, waves=3, orders_per_day=12, rate_interval_ms=4 * HOUR_MS,
                          late_orders=0, late_rates=0)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        result = run(root, sample=sample, instance=instance, echo=False)
    finally:
        instance.dispose()
    assert result.batches and result.backfill, "the demo pipeline materialized nothing"
    yield home, root


@pytest.fixture(scope="module")
def webserver(dagster_home: tuple[Path, Path]) -> Iterator[str]:
    home, root = dagster_home
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "TJ_LAKE_ROOT": str(root),
           "PYTHONPATH": str(REPO)}
    log = open(home / "webserver.log", "wb")  # noqa: SIM115 - closed at teardown
    exe = Path(sys.executable).with_name("dagster-webserver")
    proc = subprocess.Popen(
        [str(exe), "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"dagster-webserver exited with {proc.returncode}: "
                                     f"{(home / 'webserver.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("dagster-webserver did not answer within 180 s")
            time.sleep(1)
        yield url
    finally:
        # The webserver forks a code server: end the whole process group it leads.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _text_after_load(page, must_contain: list[str], *, absent: tuple[str, ...] = (),
                     timeout_s: float = 60) -> str:
    """The page's visible text once it shows every string of `must_contain` and none of
    `absent` (or whatever it shows at the timeout)."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        _dismiss_onboarding(page)
        text = page.inner_text("body")
        if all(s in text for s in must_contain) and not any(s in text for s in absent):
            return text
        time.sleep(0.5)
    return text


def _dismiss_onboarding(page) -> None:
    # A first visit shows a "Join the Dagster community" dialog over the page.
    skip = page.get_by_role("button", name="Skip")
    if skip.count() and skip.first.is_visible():
        skip.first.click()


def test_lineage_and_join_asset_page(webserver: str) -> None:
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{webserver}/asset-groups", wait_until="domcontentloaded")
            lineage = [JOIN, "orders", "rates", TABLE_JOIN, "customers", "accounts", COUNT]
            text = _text_after_load(page, ["Global asset lineage", *lineage], absent=("Loading",))
            page.screenshot(path=str(SCREENSHOTS / "lineage.png"))
            for asset in lineage:
                assert asset in text, f"lineage does not show {asset}: {text[:1500]}"
            assert "Loading" not in text, "the lineage nodes never finished loading"

            page.goto(f"{webserver}/assets/{JOIN}", wait_until="domcontentloaded")
            text = _text_after_load(page, ["Latest materialization", "rows_out", "delta_version"])
            page.screenshot(path=str(SCREENSHOTS / "join_overview.png"), full_page=True)
            assert "Latest materialization" in text, text[:3000]
            # The latest materialization is the backfill; its metadata is on the overview.
            for key in ("rows_out", "delta_version", "event_days_touched", "table_path", "backfill"):
                assert key in text, f"{key!r} not on the asset page: {text[:3000]}"

            page.goto(f"{webserver}/assets/{JOIN}?view=events", wait_until="domcontentloaded")
            text = _text_after_load(page, ["rows_out", "delta_version", "2024-03-01"])
            page.screenshot(path=str(SCREENSHOTS / "join_events.png"), full_page=True)
            # Micro-batch and backfill materializations, per event-day partition.
            assert "2024-03-01" in text and "2024-03-02" in text, text[:3000]
            assert "rows_out" in text and "delta_version" in text, text[:3000]

            # The table-table join: its latest materialization is the backfill of its temporal
            # history; its micro-batches report updates in per side, results out, out-of-order
            # updates ignored and expired ones, and the Delta version.
            page.goto(f"{webserver}/assets/{TABLE_JOIN}", wait_until="domcontentloaded")
            text = _text_after_load(page, ["Latest materialization", "rows_out", "delta_version"])
            page.screenshot(path=str(SCREENSHOTS / "table_join_overview.png"), full_page=True)
            for key in ("Latest materialization", "rows_out", "delta_version", "event_days_touched",
                        "backfill"):
                assert key in text, f"{key!r} not on the {TABLE_JOIN} page: {text[:3000]}"
            page.goto(f"{webserver}/assets/{TABLE_JOIN}?view=events", wait_until="domcontentloaded")
            wanted = ["rows_in_left", "rows_in_right", "out_of_order_ignored_left", "expired_right",
                      "rows_out", "delta_version"]
            text = _text_after_load(page, wanted)
            page.screenshot(path=str(SCREENSHOTS / "table_join_events.png"), full_page=True)
            for key in wanted:
                assert key in text, f"{key!r} not in the {TABLE_JOIN} events: {text[:3000]}"
        finally:
            browser.close()
