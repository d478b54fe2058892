"""Asset checks of a join asset: the output is right, complete and clean.

- `backfill_agrees_with_stream` (per event day): the run's event days recomputed with the batch
  form (one dry-run backfill, nothing committed), compared with what the micro-batches wrote, row
  for row. Both sides stay Spark DataFrames: only counts reach the driver. Records still held
  back (grace) are left out on both sides, so a day can be compared before it is complete. A
  difference means late data arrived after the micro-batches had joined (within history
  retention): the day is **stale**; the check warns on that day's partition (the UI shows it
  failed) until a backfill of the day replaces it (the backfill job runs this check on its days,
  which then pass), and the nightly schedule backfills exactly the stale days. The staleness
  sensor runs it over the late-data horizon after micro-batches wrote. Its words tell three
  cases apart: rows that differ (late data arrived), a day nothing was written for though the
  batch form joins rows (never computed: a join added over existing data, or a table join's
  temporal history before its first backfill), and a day with nothing on either side (nothing
  to compare, passed).
- `no_duplicate_output_rows`: every output row identity (for the stream-table join: the stream
  record) appears at most once (a micro-batch re-run after a crash must not write twice).
- `quarantine_below_threshold`: quarantined input rows (bad landing rows, expired table
  updates, late stream records under `late: quarantine`) stay below `quarantine_threshold` of
  the input rows.
- an operator's own check where its spec names one (`consistency_check`): for the table-table
  join, `latest_equals_temporal_history` (its current results against the temporal history at
  its stream time). Operators without a batch form (filter, aggregate) have no agreement check.
"""

from collections.abc import Sequence
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    AssetRecordsFilter,
    MetadataValue,
    asset_check,
)

from assets.factory import PipelineAssets, layout_of
from assets.partitions import day_span
from joins import audit
from joins import lake as delta
from joins.pipeline import DayDifference
from resources import LakeResource, SparkResource
from resources.dagster_private import (
    AssetCheckEvaluationTargetMaterializationData,
)

AGREEMENT = "backfill_agrees_with_stream"
NO_DUPLICATES = "no_duplicate_output_rows"
QUARANTINE = "quarantine_below_threshold"


def build_join_checks(ja: PipelineAssets) -> list[AssetChecksDefinition]:
    spec = ja.spec

    @asset_check(asset=ja.join_key, name=AGREEMENT, partitions_def=ja.partitions_def,
                 description="Each event day, recomputed with the batch form, equals what the "
                             "micro-batches wrote (compared in Spark); a day that differs is "
                             "stale until a backfill replaces it.")
    def _agreement(context: AssetCheckExecutionContext, spark: SparkResource,
                   lake: LakeResource) -> AssetCheckResult:
        engine = spec.engine(layout_of(lake, spec))
        days = list(context.partition_keys)
        stream_time = engine.stream_time()
        if stream_time is None or not delta.table_exists(engine.layout.output):
            return AssetCheckResult(passed=True, description="nothing to compare: no micro-batch "
                                    "has written output yet")
        # One dry-run backfill of all the days: the batch form against the output, no commit.
        report = engine.backfill(spark.session_for(context), days, dry_run=True)
        verdicts = {day: report.per_day.get(day, DayDifference()) for day in days}
        if context.has_partition_key:
            return _day_result(days[0], verdicts[days[0]], stream_time)
        # A run over a range of days (even of one) gets one result from Dagster, not tied to a
        # day; each day's verdict is reported on its own partition so the UI shows which days
        # are stale.
        for day, d in verdicts.items():
            result = _day_result(day, d, stream_time)
            context.op_execution_context.log_event(AssetCheckEvaluation(
                asset_key=ja.join_key, check_name=AGREEMENT, passed=result.passed,
                severity=result.severity, description=result.description,
                metadata=result.metadata, partition=day,
                target_materialization_data=_latest_materialization(context, ja.join_key, day)))
        stale = [day for day, d in verdicts.items() if not d.agrees]
        summary = {"event_days": MetadataValue.text(", ".join(days)),
                   "stale_days": MetadataValue.text(", ".join(stale) or "none"),
                   "rows_changed": MetadataValue.int(sum(d.changed for d in verdicts.values())),
                   "stream_time": MetadataValue.timestamp(stream_time / 1000)}
        if not stale:
            every = "" if len(days) == 1 else "every day "
            return AssetCheckResult(passed=True, metadata=summary,
                                    description=f"{day_span(days)}: {every}identical")
        late = [day for day in stale if verdicts[day].before > 0]
        never = [day for day in stale if verdicts[day].before == 0]
        what = [*([f"stale event day(s) {', '.join(late)}: late data arrived after the "
                   f"micro-batches"] if late else []),
                *([f"event day(s) {', '.join(never)} never computed"] if never else [])]
        return AssetCheckResult(
            passed=False, severity=AssetCheckSeverity.WARN, metadata=summary,
            description=f"{'; '.join(what)}; backfill them (the nightly schedule does)")

    @asset_check(asset=ja.join_key, name=NO_DUPLICATES,
                 description="Each stream record appears at most once in the output.")
    def _no_duplicates(context: AssetCheckExecutionContext, spark: SparkResource,
                       lake: LakeResource) -> AssetCheckResult:
        engine = spec.engine(layout_of(lake, spec))
        dup = audit.duplicate_rows(spark.session_for(context), engine.layout.output,
                                   engine.output_identity())
        return AssetCheckResult(
            passed=dup.duplicated_records == 0,
            metadata={"output_rows": MetadataValue.int(dup.rows),
                      "duplicated_records": MetadataValue.int(dup.duplicated_records),
                      "extra_rows": MetadataValue.int(dup.extra_rows)},
            description=("no duplicates" if dup.duplicated_records == 0 else
                         f"{dup.duplicated_records} stream record(s) appear more than once "
                         f"({dup.extra_rows} extra rows)"))

    @asset_check(asset=ja.join_key, name=QUARANTINE,
                 description=f"Quarantined input rows stay at or below "
                             f"{spec.quarantine_threshold:.1%} of the input rows.")
    def _quarantine(context: AssetCheckExecutionContext, spark: SparkResource,
                    lake: LakeResource) -> AssetCheckResult:
        q = audit.quarantine_counts(spark.session_for(context), layout_of(lake, spec))
        passed = q.share <= spec.quarantine_threshold
        rows = [f"| {where} | {kind} | {n} |" for (where, kind), n in sorted(q.by_kind.items())]
        table = "\n".join(["| where | kind | rows |", "|---|---|---:|", *rows])
        return AssetCheckResult(
            passed=passed,
            metadata={"rows_in": MetadataValue.int(q.rows_in),
                      "quarantined": MetadataValue.int(q.quarantined),
                      "share": MetadataValue.float(round(q.share, 6)),
                      "threshold": MetadataValue.float(float(spec.quarantine_threshold)),
                      "by_reason": MetadataValue.md(table if q.by_kind else "nothing quarantined")},
            description=f"{q.quarantined} of {q.rows_in} input rows quarantined ({q.share:.2%}; "
                        f"threshold {spec.quarantine_threshold:.1%})")

    checks = [_no_duplicates, _quarantine]
    if spec.has_batch_form:
        checks.insert(0, _agreement)
    own = spec.consistency_check()
    if own is not None:
        checks.append(_consistency_check(ja, *own))
    return checks


def _day_result(day: str, d: DayDifference, stream_time: int) -> AssetCheckResult:
    metadata = {
        "event_day": MetadataValue.text(day),
        "rows_in_output": MetadataValue.int(d.before),
        "rows_in_batch_form": MetadataValue.int(d.after),
        "rows_added": MetadataValue.int(d.added),
        "rows_removed": MetadataValue.int(d.removed),
        "rows_changed": MetadataValue.int(d.changed),
        "stream_time": MetadataValue.timestamp(stream_time / 1000),
    }
    if d.agrees and d.before == 0:
        return AssetCheckResult(passed=True, metadata=metadata,
                                description=f"{day}: nothing to compare: no output row of this "
                                            f"day, and no record of it the batch form joins")
    if d.agrees:
        return AssetCheckResult(passed=True, metadata=metadata,
                                description=f"{day}: {d.before} rows, identical")
    if d.before == 0:
        # Nothing of the day was written where the check compares (the output, or a table
        # join's temporal history before its first backfill), yet the batch form joins rows:
        # the day was never computed, which is not late data.
        return AssetCheckResult(
            passed=False, severity=AssetCheckSeverity.WARN, metadata=metadata,
            description=f"{day}: never computed: no row of this day was written yet, the batch "
                        f"form joins {d.after}; backfill partition {day} to compute it")
    return AssetCheckResult(
        passed=False, severity=AssetCheckSeverity.WARN, metadata=metadata,
        description=f"{day}: a backfill would change {d.changed} row(s), add {d.added} and remove "
                    f"{d.removed}; late data arrived after the micro-batches: stale, backfill "
                    f"partition {day} to correct it")


def _latest_materialization(context: AssetCheckExecutionContext, key: AssetKey,
                            day: str) -> Any:
    """The materialization of `day` a check evaluation judged (the UI ties the two)."""
    found = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[day]), limit=1).records
    if not found:
        return None
    mat = found[0]
    return AssetCheckEvaluationTargetMaterializationData(
        run_id=mat.event_log_entry.run_id, storage_id=mat.storage_id, timestamp=mat.timestamp)


def stale_days(instance: Any, join_key: AssetKey, days: Sequence[str]) -> tuple[list[str], list[str]]:
    """Of `days`: (those whose latest agreement verdict failed, those with any verdict)."""
    from dagster import AssetCheckKey

    from resources.dagster_private import AssetCheckExecutionRecordStatus

    infos = instance.event_log_storage.get_asset_check_partition_info(
        [AssetCheckKey(join_key, AGREEMENT)], partition_keys=list(days))
    status = {i.partition_key: i.latest_execution_status for i in infos if i.partition_key}
    done = (AssetCheckExecutionRecordStatus.SUCCEEDED, AssetCheckExecutionRecordStatus.FAILED)
    failed = [d for d in days if status.get(d) == AssetCheckExecutionRecordStatus.FAILED]
    return failed, [d for d in days if status.get(d) in done]


def _consistency_check(ja: PipelineAssets, name: str, description: str) -> AssetChecksDefinition:
    """The operator's own check (for the table-table join: its latest results against the
    temporal history at its stream time)."""
    spec = ja.spec

    @asset_check(asset=ja.join_key, name=name, description=description)
    def _own(context: AssetCheckExecutionContext, spark: SparkResource,
             lake: LakeResource) -> AssetCheckResult:
        result = spec.engine(layout_of(lake, spec)).consistency(spark.session_for(context))
        metadata = {k: MetadataValue.int(v) if isinstance(v, int) else MetadataValue.text(str(v))
                    for k, v in result.metadata.items()}
        return AssetCheckResult(passed=result.passed, metadata=metadata,
                                description=result.description)

    return _own
