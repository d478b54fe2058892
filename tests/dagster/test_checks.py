"""The asset checks' verdicts, with the engine's answers stubbed (the Spark side is covered by
test_materialize): thresholds, severities, and which day the agreement check compares."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets
from joins import audit
from joins import lake as delta
from joins.operators.stream_table_join.pipeline import StreamTableJoinEngine
from joins.pipeline import BackfillSummary, DayDifference
from pipelines.checks import AGREEMENT, NO_DUPLICATES, QUARANTINE, build_join_checks
from pipelines.definitions import DEMO_SPEC
from pipelines.partitions import day_start_ms
from resources import LakeResource, SparkResource

HOUR = 3_600_000


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> dict[str, dg.AssetChecksDefinition]:
    monkeypatch.setattr(SparkResource, "get_session", lambda self: None)
    built = build_join_checks(build_pipeline_assets(DEMO_SPEC))
    return {next(iter(c.check_keys)).name: c for c in built}


def _run(check: dg.AssetChecksDefinition) -> dg.AssetCheckResult:
    return check(spark=SparkResource(), lake=LakeResource(root="/tmp/unused"))


@pytest.mark.parametrize(("quarantined", "passed"), [(0, True), (5, True), (6, False)])
def test_quarantine_threshold(checks, monkeypatch: pytest.MonkeyPatch, quarantined: int,
                              passed: bool) -> None:
    counts = audit.QuarantineCounts(rows_in=100, quarantined=quarantined,
                                    by_kind={("rates", "expired"): quarantined})
    monkeypatch.setattr(audit, "quarantine_counts", lambda spark, layout: counts)
    result = _run(checks[QUARANTINE])
    assert result.passed is passed  # the demo spec's threshold is 5 %
    assert f"{quarantined} of 100 input rows quarantined" in (result.description or "")


def test_duplicates_fail_the_check(checks, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "duplicate_rows", lambda spark, path, identity: audit.Duplicates(10, 2, 3))
    result = _run(checks[NO_DUPLICATES])
    assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    assert "2 stream record(s) appear more than once (3 extra rows)" in (result.description or "")


def test_agreement_compares_the_most_recent_complete_day(checks, monkeypatch: pytest.MonkeyPatch) -> None:
    # Stream time 00:10 on 03-03 with 30 min grace: records of 03-02 may still be in the buffer.
    stream_time = day_start_ms(dt.date(2024, 3, 3)) + HOUR // 6
    compared: list[str] = []

    def compare(difference: DayDifference):
        def backfill(self, spark, days, *, dry_run=False) -> BackfillSummary:
            assert dry_run  # the check never commits
            compared.extend(days)
            return BackfillSummary(days=tuple(days), rows_in=10, output_version=3, committed=False,
                                   per_day={d: difference for d in days})
        return backfill

    monkeypatch.setattr(delta, "table_exists", lambda path: True)
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time", lambda self: stream_time)
    monkeypatch.setattr(StreamTableJoinEngine, "backfill", compare(DayDifference(10, 10, 0, 0, 2)))
    result = _run(checks[AGREEMENT])
    assert compared == ["2024-03-01"]
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert "backfill partition 2024-03-01" in (result.description or "")

    monkeypatch.setattr(StreamTableJoinEngine, "backfill", compare(DayDifference(10, 10)))
    assert _run(checks[AGREEMENT]).passed


def test_agreement_before_any_output_passes_and_says_why(checks, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time", lambda self: None)
    monkeypatch.setattr(delta, "table_exists", lambda path: False)
    result = _run(checks[AGREEMENT])
    assert result.passed and "no micro-batch has written output yet" in (result.description or "")
