"""What the browser tests share: headless Chromium (Debian's, through Playwright: `playwright
install` cannot download here), waiting for a page to show what it should, and screenshots
saved under `var/screenshots/` (gitignored; `TJ_SCREENSHOT_DIR` moves them).

Outside CI a browser test is skipped when /usr/bin/chromium or playwright is missing; with
CI=true it fails instead (`require_browser`)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TJ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = Path(os.environ.get("TJ_SCREENSHOT_DIR") or REPO / "var" / "screenshots")
LOCATION, REPOSITORY = "pipelines.definitions", "__repository__"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_browser() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not os.path.exists(CHROMIUM):
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set TJ_CHROMIUM)"
    return None


def skip_without_browser() -> None:
    """At collection, before any fixture starts Spark: outside CI a missing browser skips the
    module with the reason; in CI it must run, so `require_browser` fails instead."""
    if missing_browser() and not in_ci():
        pytest.skip(str(missing_browser()), allow_module_level=True)


def require_browser() -> None:
    reason = missing_browser()
    if reason:
        pytest.fail(f"{reason}; CI must run the browser tests")


@contextmanager
def browser_page() -> Iterator[Any]:
    """A fresh headless Chromium page (1600x1000)."""
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": 1600, "height": 1000})
        finally:
            browser.close()


def text_after_load(page: Any, must_contain: list[str], *, absent: tuple[str, ...] = (),
                    timeout_s: float = 60) -> str:
    """The page's visible text once it shows every string of `must_contain` and none of
    `absent` (or whatever it shows at the timeout)."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = page.inner_text("body")
        if all(s in text for s in must_contain) and not any(s in text for s in absent):
            return text
        time.sleep(0.5)
    return text


def shot(page: Any, name: str) -> Path:
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def assert_shows(text: str, wanted: list[str], where: str) -> None:
    for item in wanted:
        assert item in text, f"{item!r} not on {where}: {text[:3000]}"
