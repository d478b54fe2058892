"""What a data engineer sees in the Dagster UI after `./tj demo`: the lineage, the join's
materializations and metadata, partitions that start at the data's first day, the quarantine
with its rows and reasons, and a day that late data made stale, then fresh after the backfill.

The demo (tiny data) runs into a temporary DAGSTER_HOME and lake; `dagster-webserver` serves
them on a free loopback port (own process group, stopped at teardown); headless Chromium opens
the pages and saves a screenshot of each under `var/screenshots/` (tests/dagster/browser.py).
The live demo's sensor page is `test_ui_live.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dagster.browser import (
    assert_shows,
    browser_page,
    require_browser,
    shot,
    skip_without_browser,
    text_after_load,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.spark]
skip_without_browser()

JOIN = "orders_with_rates"
# The demo's second pipeline: the primary-key table-table join and the count on top of it.
TABLE_JOIN, COUNT = "customer_accounts", "accounts_per_country"
AGREEMENT = "backfill_agrees_with_stream"


@pytest.fixture(scope="module")
def demo_lake(spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Run the demo on tiny data; yields (DAGSTER_HOME, lake root)."""
    require_browser()
    import dagster as dg

    from demo.run import run
    from demo.sample_data import HOUR_MS, SampleConfig
    from runplatform.instance import prepare_dagster_home

    base = tmp_path_factory.mktemp("ui")
    home, root = prepare_dagster_home(base / "dagster_home"), base / "lake"
    # Late rate updates (the sample's default): a day goes stale, the nightly run backfills it.
    sample = SampleConfig(days=2, waves=3, orders_per_day=12, rate_interval_ms=4 * HOUR_MS,
                          late_orders=0)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        result = run(root, sample=sample, instance=instance, echo=False)
    finally:
        instance.dispose()
    assert result.batches, "the demo pipeline materialized nothing"
    yield home, root


# A spec file with a near-miss key, served beside the demo's: it must show where a user looks.
BROKEN_SPEC = "my_join.yaml"


@pytest.fixture(scope="module")
def webserver(demo_lake: tuple[Path, Path]) -> Iterator[str]:
    import shutil

    from pipelines.definitions import SPECS_DIR
    from runplatform.dagster_server import DagsterServer

    home, root = demo_lake
    specs = root.parent / "specs"
    shutil.copytree(SPECS_DIR, specs, dirs_exist_ok=True)
    text = (SPECS_DIR / "orders_with_rates.yaml").read_text()
    broken = text.replace("name: orders_with_rates", "name: my_join").replace("grace_ms:", "grace:")
    (specs / BROKEN_SPEC).write_text(broken)
    with DagsterServer(home=home, env={"TJ_LAKE_ROOT": str(root), "TJ_SPECS_DIR": str(specs)},
                       daemon=False, ready_timeout_s=180) as server:
        yield server.url


@pytest.fixture(scope="module")
def page(webserver: str) -> Iterator[Any]:
    with browser_page() as p:
        yield p


def _open(page: Any, url: str, wanted: list[str], name: str, *,
          absent: tuple[str, ...] = ()) -> str:
    page.goto(url, wait_until="domcontentloaded")
    text = text_after_load(page, wanted, absent=absent)
    shot(page, name)
    assert_shows(text, wanted, url)
    return text


def test_lineage_and_join_asset_pages(webserver: str, page: Any) -> None:
    # The global lineage shows one node per pipeline (its group; the count reads the join).
    text = _open(page, f"{webserver}/asset-groups",
                 ["Global asset lineage", JOIN, TABLE_JOIN, COUNT, "orders_with_deliveries"],
                 "lineage", absent=("Loading",))
    assert "Loading" not in text, "the lineage nodes never finished loading"
    # No "join the Dagster community" dialog: the instance config turns it off.
    assert "Join the Dagster community" not in text
    # The join's own lineage: its inputs and the quarantine it feeds.
    _open(page, f"{webserver}/assets/{JOIN}?view=lineage", ["orders", "rates", f"{JOIN}_quarantine"],
          "join_lineage")

    # The latest materialization's metadata is on the overview.
    _open(page, f"{webserver}/assets/{JOIN}", ["Latest materialization", "rows_out",
                                               "delta_version", "event_days_touched",
                                               "table_path", "mode"], "join_overview")
    # Micro-batch and backfill materializations, per event-day partition, each with its rows.
    _open(page, f"{webserver}/assets/{JOIN}?view=events",
          ["rows_out", "delta_version", "2024-03-01", "2024-03-02", "event_day"],
          "join_events")

    # The table-table join: its latest materialization is the backfill of its temporal history;
    # its micro-batches report updates in per side, results out, out-of-order updates ignored
    # and expired ones, and the Delta version.
    _open(page, f"{webserver}/assets/{TABLE_JOIN}", ["Latest materialization", "rows_out",
                                                     "delta_version", "event_days_touched",
                                                     "backfill"], "table_join_overview")
    # The events list: each event day's materializations; the selected (latest) one is the
    # backfill's (the micro-batches' per-side counters are asserted in test_table_pipelines).
    _open(page, f"{webserver}/assets/{TABLE_JOIN}?view=events",
          ["2024-03-01", "2024-03-02", "mode", "rows_out", "delta_version"], "table_join_events")


def test_partitions_start_at_the_first_day_with_data(webserver: str, page: Any) -> None:
    text = _open(page, f"{webserver}/assets/{JOIN}?view=partitions", ["2024-03-01", "2024-03-02"],
                 "join_partitions")
    # The tiny sample's data spans 2024-03-01 .. 03-02 (stream time may reach 03-03): a handful
    # of partitions, not one a day since start_date up to today.
    assert "2024-02-29" not in text
    assert "2025-" not in text and "2026-" not in text, text[:3000]


def test_quarantine_asset_shows_rows_and_reasons(webserver: str, page: Any) -> None:
    # Rows per reason (a bad CSV row, expired table updates) and the newest rows are table
    # metadata; their cells render after the labels, so the page is read once they show.
    text = _open(page, f"{webserver}/assets/{JOIN}_quarantine",
                 ["recent", "by_reason", "rows_from_rates", "Row count", "bad_record", "expired"],
                 "quarantine")
    # The reasons in times and durations a person reads, not epoch milliseconds.
    assert re.search(r"expired: ts 2024-0\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z < stream time "
                     r"2024-0\d-\d\dT[\d:.]+Z - history retention 1 day = ", text), text[-3000:]


def test_plots_open_with_data(webserver: str, page: Any) -> None:
    """Overview -> Metadata -> Plots, by partition (the default for a partitioned asset): one
    chart per numeric metadata entry over the event days, not the empty page Dagster shows when
    the newest partitions it lists hold no materialization."""
    _open(page, f"{webserver}/assets/{JOIN}", ["Latest materialization", "Plots"], "before_plots")
    page.get_by_text("Plots", exact=True).first.click()
    text = text_after_load(page, ["rows_out", "Partitions"],
                           absent=("Asset plots are automatically generated",))
    shot(page, "plots")
    assert "Asset plots are automatically generated" not in text, "the plots are empty"
    assert page.locator("canvas").count() > 0, "no chart on the Plots view"


def test_a_broken_spec_is_a_red_asset_with_file_and_line(webserver: str, page: Any) -> None:
    from pipelines.definitions import SPECS_DIR

    text = (SPECS_DIR / "orders_with_rates.yaml").read_text().replace("grace_ms:", "grace:")
    line = 1 + text.split("\n").index(next(t for t in text.split("\n") if t.startswith("grace:")))
    _open(page, f"{webserver}/assets/my_join",
          [f"{BROKEN_SPEC} did not load", f"(line {line})", "config.grace: unknown key",
           "did you mean", "grace_ms"], "broken_spec")
    # The group of broken files is in the lineage, where a user browsing the assets sees it.
    _open(page, f"{webserver}/asset-groups", ["spec_errors"], "lineage_with_spec_error",
          absent=("Loading",))


def _land_late_rate_corrections(root: Path) -> None:
    """Rate updates for the hours the micro-batches already joined (within history retention,
    so they are stored): the orders of those hours now get other rates in the batch form."""
    from demo.sample_data import BASE_RATES, HOUR_MS, Wave, write_wave
    from joins import lake
    from joins.pipeline import PipelineLayout, parse_pipeline_spec
    from pipelines.definitions import DEMO_SPEC

    spec = parse_pipeline_spec(DEMO_SPEC)
    layout = PipelineLayout(str(root), spec)
    summary = lake.table_summary(layout.input_table("table"), columns=["ts"])
    assert summary is not None
    newest = int(summary.max["ts"])
    rates = [{"currency": c, "rate": round(r * (1.5 + k / 10), 6), "ts": newest - k * 3 * HOUR_MS}
             for c, r in BASE_RATES.items() for k in range(1, 7)]
    write_wave(Wave(index=900, rates=rates), orders_dir=root / "unused_orders",
               rates_dir=Path(layout.landing(spec.table)))


def _check_partitions(page: Any, webserver: str, name: str, wanted: list[str]) -> str:
    return _open(page, f"{webserver}/assets/{JOIN}?view=checks&checkDetail={AGREEMENT}", wanted,
                 name)


def test_a_day_late_data_made_stale_then_fresh_after_the_backfill(
        webserver: str, page: Any, demo_lake: tuple[Path, Path]) -> None:
    import dagster as dg

    from demo.demo_runner import Demo
    from joins.pipeline import PipelineLayout, parse_pipeline_spec
    from pipelines.checks import stale_days
    from pipelines.definitions import DEMO_SPEC
    from pipelines.factory import checks_job_name
    from pipelines.partitions import late_data_days
    from pipelines.schedules import RANGE_END_TAG, RANGE_START_TAG

    home, root = demo_lake
    _land_late_rate_corrections(root)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        demo = Demo(root, instance, echo=False)
        for _ in demo.sensor_runs("rates_landing_sensor"):
            pass
        for _ in demo.sensor_runs(f"{JOIN}_microbatch_sensor"):
            pass
        parsed = parse_pipeline_spec(DEMO_SPEC)
        stream_time = parsed.engine(PipelineLayout(str(root), parsed)).stream_time()
        assert stream_time is not None
        partitions = demo.defs.resolve_assets_def(JOIN).partitions_def
        days = late_data_days(stream_time, parsed.late_horizon_ms, partitions)
        # What the staleness sensor asks for after a micro-batch (or "Execute checks" in the UI).
        demo.execute(checks_job_name(parsed), dg.RunRequest(
            tags={RANGE_START_TAG: days[0], RANGE_END_TAG: days[-1]}))
        stale, checked = stale_days(instance, dg.AssetKey(JOIN), days)
        assert stale and checked == days, (stale, checked)
        text = _check_partitions(page, webserver, "stale_day", [AGREEMENT, *stale])
        assert any(w in text for w in ("Warning", "Failed", "failed")), text[:3000]

        # The nightly schedule backfills exactly the stale days; their check passes again.
        ran = demo.nightly(parsed)
        assert sorted({p for p, _ in ran.materializations}) == sorted(stale)
        still, _ = stale_days(instance, dg.AssetKey(JOIN), days)
        assert still == [], still
        text = _check_partitions(page, webserver, "fresh_after_backfill", [AGREEMENT, *stale])
        assert "Passed" in text or "passed" in text or "Succeeded" in text, text[:3000]
    finally:
        instance.dispose()
