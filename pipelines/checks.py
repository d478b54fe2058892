"""Asset checks of a join asset: the output is right, complete and clean.

- `backfill_agrees_with_stream`: the most recent complete event day (nothing of it is held back
  any more) recomputed with the batch form (a dry-run backfill), compared with what the
  micro-batches wrote, row for row. Both sides stay Spark DataFrames: only counts reach the driver. A
  difference means late data arrived after the micro-batches (within history retention): a
  backfill of that day corrects it, so the check warns and names the day.
- `no_duplicate_output_rows`: every output row identity (for the stream-table join: the stream
  record) appears at most once (a micro-batch re-run after a crash must not write twice).
- `quarantine_below_threshold`: quarantined input rows (bad landing rows, expired table
  updates, late stream records under `late: quarantine`) stay below `quarantine_threshold` of
  the input rows.
- an operator's own check where its spec names one (`consistency_check`): for the table-table
  join, `latest_equals_temporal_history` (its current results against the temporal history at
  its stream time). Operators without a batch form (filter, aggregate) have no agreement check.
"""

from dagster import AssetCheckResult, AssetChecksDefinition, AssetCheckSeverity, MetadataValue, asset_check

from assets.factory import PipelineAssets, layout_of
from joins import audit
from joins import lake as delta
from pipelines.partitions import day_key, most_recent_complete_day
from resources import LakeResource, SparkResource

AGREEMENT = "backfill_agrees_with_stream"
NO_DUPLICATES = "no_duplicate_output_rows"
QUARANTINE = "quarantine_below_threshold"


def build_join_checks(ja: PipelineAssets) -> list[AssetChecksDefinition]:
    spec = ja.spec

    @asset_check(asset=ja.join, name=AGREEMENT,
                 description="The most recent complete event day, recomputed with the batch form, "
                             "equals what the micro-batches wrote (compared in Spark).")
    def _agreement(spark: SparkResource, lake: LakeResource) -> AssetCheckResult:
        engine = spec.engine(layout_of(lake, spec))
        stream_time = engine.stream_time()
        if stream_time is None or not delta.table_exists(engine.layout.output):
            return AssetCheckResult(passed=True, description="nothing to compare: no micro-batch "
                                    "has written output yet")
        day = most_recent_complete_day(stream_time, spec.hold_back_ms())
        if day < spec.start_date:
            return AssetCheckResult(passed=True, description=f"no complete event day yet (stream "
                                    f"time {stream_time}, held back {spec.hold_back_ms()} ms)")
        key = day_key(day)
        # A dry-run backfill: the batch form of the day against the output, nothing committed.
        cmp = engine.backfill(spark.get_session(), [key], dry_run=True).per_day[key]
        metadata = {
            "event_day": MetadataValue.text(key),
            "rows_in_output": MetadataValue.int(cmp.before),
            "rows_in_batch_form": MetadataValue.int(cmp.after),
            "rows_added": MetadataValue.int(cmp.added),
            "rows_removed": MetadataValue.int(cmp.removed),
            "rows_changed": MetadataValue.int(cmp.changed),
            "stream_time": MetadataValue.int(stream_time),
        }
        if cmp.agrees:
            return AssetCheckResult(passed=True, metadata=metadata,
                                    description=f"{key}: {cmp.before} rows, identical")
        return AssetCheckResult(
            passed=False, severity=AssetCheckSeverity.WARN, metadata=metadata,
            description=f"{key}: a backfill would change {cmp.changed} row(s), add {cmp.added} and "
                        f"remove {cmp.removed}; late data arrived after the micro-batches: "
                        f"backfill partition {key} to correct it")

    @asset_check(asset=ja.join, name=NO_DUPLICATES,
                 description="Each stream record appears at most once in the output.")
    def _no_duplicates(spark: SparkResource, lake: LakeResource) -> AssetCheckResult:
        engine = spec.engine(layout_of(lake, spec))
        dup = audit.duplicate_rows(spark.get_session(), engine.layout.output,
                                   engine.output_identity())
        return AssetCheckResult(
            passed=dup.duplicated_records == 0,
            metadata={"output_rows": MetadataValue.int(dup.rows),
                      "duplicated_records": MetadataValue.int(dup.duplicated_records),
                      "extra_rows": MetadataValue.int(dup.extra_rows)},
            description=("no duplicates" if dup.duplicated_records == 0 else
                         f"{dup.duplicated_records} stream record(s) appear more than once "
                         f"({dup.extra_rows} extra rows)"))

    @asset_check(asset=ja.join, name=QUARANTINE,
                 description=f"Quarantined input rows stay at or below "
                             f"{spec.quarantine_threshold:.1%} of the input rows.")
    def _quarantine(spark: SparkResource, lake: LakeResource) -> AssetCheckResult:
        q = audit.quarantine_counts(spark.get_session(), layout_of(lake, spec))
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


def _consistency_check(ja: PipelineAssets, name: str, description: str) -> AssetChecksDefinition:
    """The operator's own check (for the table-table join: its latest results against the
    temporal history at its stream time)."""
    spec = ja.spec

    @asset_check(asset=ja.join, name=name, description=description)
    def _own(spark: SparkResource, lake: LakeResource) -> AssetCheckResult:
        result = spec.engine(layout_of(lake, spec)).consistency(spark.get_session())
        metadata = {k: MetadataValue.int(v) if isinstance(v, int) else MetadataValue.text(str(v))
                    for k, v in result.metadata.items()}
        return AssetCheckResult(passed=result.passed, metadata=metadata,
                                description=result.description)

    return _own
