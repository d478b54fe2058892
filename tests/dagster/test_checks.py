"""The asset checks' verdicts, with the engine's answers stubbed (the Spark side is covered by
test_materialize): thresholds, severities, and the agreement check's verdict per event day."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets
from joins import audit
from joins import lake as delta
from joins.core.time import day_start_ms
from joins.operators.stream_table_join.pipeline import StreamTableJoinEngine
from joins.pipeline import BackfillSummary, DayDifference, observe
from pipelines.checks import AGREEMENT, NO_DUPLICATES, QUARANTINE, build_join_checks, stale_days
from pipelines.definitions import DEMO_SPEC, build_definitions
from resources import LakeResource, SparkResource

HOUR = 3_600_000


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SparkResource, "get_session", lambda self: None)
    monkeypatch.setattr(SparkResource, "session_for", lambda self, context: None)


@pytest.fixture
def checks() -> dict[str, dg.AssetChecksDefinition]:
    built = build_join_checks(build_pipeline_assets(DEMO_SPEC))
    return {next(iter(c.check_keys)).name: c for c in built}


def _run(check: dg.AssetChecksDefinition) -> dg.AssetCheckResult:
    # The checks log which SparkSession served them (`session_for`): they take a context.
    return check(dg.build_asset_check_context(), spark=SparkResource(),
                 lake=LakeResource(root="/tmp/unused"))


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


Verdict = tuple[str | None, bool, str]


def _agreement_run(monkeypatch: pytest.MonkeyPatch, tmp_path, instance: dg.DagsterInstance,
                   per_day: dict[str, DayDifference], tags: dict[str, str]) -> list[Verdict]:
    """Run the checks job with the engine's dry run stubbed; (partition, passed, description) of
    every agreement verdict recorded."""
    compared: list[list[str]] = []

    def backfill(self, spark, days, *, dry_run=False) -> BackfillSummary:
        assert dry_run  # the check never commits
        compared.append(list(days))
        return BackfillSummary(days=tuple(days), rows_in=10, output_version=3, committed=False,
                               per_day={d: per_day[d] for d in days})

    monkeypatch.setattr(observe, "day_rows", lambda layout: dict.fromkeys(per_day, 10))
    monkeypatch.setattr(delta, "table_exists", lambda path: True)
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time",
                        lambda self: day_start_ms(dt.date(2024, 3, 3)) + HOUR)
    monkeypatch.setattr(StreamTableJoinEngine, "backfill", backfill)
    monkeypatch.setattr(audit, "duplicate_rows", lambda spark, path, identity: audit.Duplicates(10, 0, 0))
    monkeypatch.setattr(audit, "quarantine_counts",
                        lambda spark, layout: audit.QuarantineCounts(rows_in=100, quarantined=0))
    defs = build_definitions([DEMO_SPEC], lake_root=str(tmp_path))
    result = defs.resolve_job_def("orders_with_rates_checks").execute_in_process(
        instance=instance, tags=tags)
    assert result.success
    assert len(compared) == 1, "one dry run for all the days"
    return [(e.event_specific_data.partition, e.event_specific_data.passed,
             e.event_specific_data.description or "")
            for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
            and e.event_specific_data.check_name == AGREEMENT]


def test_agreement_judges_every_day_of_the_run(monkeypatch, tmp_path, instance) -> None:
    """Each day of a run over a range gets its own verdict (the UI shows the stale ones as
    failed partitions of the check); the run's own result names the stale days."""
    per_day = {"2024-03-01": DayDifference(10, 10), "2024-03-02": DayDifference(10, 10, 0, 0, 2),
               "2024-03-03": DayDifference(4, 4)}
    verdicts = _agreement_run(monkeypatch, tmp_path, instance, per_day, {
        "dagster/asset_partition_range_start": "2024-03-01",
        "dagster/asset_partition_range_end": "2024-03-03"})
    by_day = {p: (passed, text) for p, passed, text in verdicts}
    assert set(by_day) == {"2024-03-01", "2024-03-02", "2024-03-03", None}
    assert by_day["2024-03-01"][0] and by_day["2024-03-03"][0]
    assert not by_day["2024-03-02"][0]
    assert "backfill partition 2024-03-02" in by_day["2024-03-02"][1]
    assert by_day[None] == (False, "stale event day(s) 2024-03-02: late data arrived after the "
                                   "micro-batches; backfill them (the nightly schedule does)")
    # What the schedule reads back: the latest verdict per day.
    failed, checked = stale_days(instance, dg.AssetKey("orders_with_rates"), list(per_day))
    assert failed == ["2024-03-02"] and checked == list(per_day)


def test_agreement_says_never_computed_and_nothing_to_compare(monkeypatch, tmp_path,
                                                              instance) -> None:
    """A day nothing was written for is not "late data", and a day with nothing on either side
    is not "0 rows, identical"."""
    per_day = {"2024-03-01": DayDifference(0, 5, 5, 0, 0), "2024-03-02": DayDifference(0, 0),
               "2024-03-03": DayDifference(4, 4)}
    verdicts = _agreement_run(monkeypatch, tmp_path, instance, per_day, {
        "dagster/asset_partition_range_start": "2024-03-01",
        "dagster/asset_partition_range_end": "2024-03-03"})
    by_day = {p: (passed, text) for p, passed, text in verdicts}
    assert by_day["2024-03-01"] == (False, "2024-03-01: never computed: no row of this day was "
                                           "written yet, the batch form joins 5; backfill "
                                           "partition 2024-03-01 to compute it")
    assert by_day["2024-03-02"] == (True, "2024-03-02: nothing to compare: no output row of this "
                                          "day, and no record of it the batch form joins")
    assert by_day["2024-03-03"] == (True, "2024-03-03: 4 rows, identical")
    assert by_day[None] == (False, "event day(s) 2024-03-01 never computed; backfill them (the "
                                   "nightly schedule does)")


def test_agreement_of_one_partition(monkeypatch, tmp_path, instance) -> None:
    per_day = {"2024-03-01": DayDifference(10, 10), "2024-03-02": DayDifference(10, 10)}
    verdicts = _agreement_run(monkeypatch, tmp_path, instance, per_day,
                              {"dagster/partition": "2024-03-02"})
    assert verdicts == [("2024-03-02", True, "2024-03-02: 10 rows, identical")]


def test_agreement_before_any_output_passes_and_says_why(monkeypatch, tmp_path, instance) -> None:
    monkeypatch.setattr(StreamTableJoinEngine, "stream_time", lambda self: None)
    monkeypatch.setattr(delta, "table_exists", lambda path: False)
    defs = build_definitions([DEMO_SPEC], lake_root=str(tmp_path))
    monkeypatch.setattr(audit, "duplicate_rows", lambda spark, path, identity: audit.Duplicates(0, 0, 0))
    monkeypatch.setattr(audit, "quarantine_counts",
                        lambda spark, layout: audit.QuarantineCounts(rows_in=0, quarantined=0))
    result = defs.resolve_job_def("orders_with_rates_checks").execute_in_process(
        instance=instance, tags={"dagster/partition": "2024-03-01"})
    [agreement] = [e.event_specific_data for e in result.all_events
                   if e.event_type_value == "ASSET_CHECK_EVALUATION"
                   and e.event_specific_data.check_name == AGREEMENT]
    assert agreement.passed and "no micro-batch has written output yet" in agreement.description


@pytest.mark.parametrize(("start", "end", "summary"), [
    ("2024-03-01", "2024-03-02", "2024-03-01 .. 2024-03-02 (2 days): every day identical"),
    ("2024-03-02", "2024-03-02", "2024-03-02: identical")])
def test_agreement_of_a_range_that_agrees_names_its_days(monkeypatch, tmp_path, instance,
                                                         start, end, summary) -> None:
    per_day = {"2024-03-01": DayDifference(10, 10), "2024-03-02": DayDifference(4, 4)}
    verdicts = _agreement_run(monkeypatch, tmp_path, instance, per_day, {
        "dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end})
    assert {p: (passed, text) for p, passed, text in verdicts}[None] == (True, summary)
