"""Asset checks of a join asset: the output is right, complete and clean.

- `backfill_agrees_with_stream`: the most recent complete event day (every stream record of it
  has left the grace buffer) recomputed with the batch form, compared with what the micro-batches
  wrote, row for row. Both sides stay Spark DataFrames: only counts reach the driver. A
  difference means late data arrived after the micro-batches (within history retention): a
  backfill of that day corrects it, so the check warns and names the day.
- `no_duplicate_output_rows`: every stream record appears at most once in the output (a
  micro-batch re-run after a crash must not write its rows twice).
- `quarantine_below_threshold`: quarantined input rows (bad landing rows, expired table
  updates, late stream records under `late: quarantine`) stay below `quarantine_threshold` of
  the input rows.
"""

from dagster import AssetCheckResult, AssetChecksDefinition, AssetCheckSeverity, MetadataValue, asset_check

from assets import engine
from assets.factory import JoinAssets
from assets.layout import JoinLayout
from pipelines.partitions import day_key, most_recent_complete_day
from resources import LakeResource, SparkResource

AGREEMENT = "backfill_agrees_with_stream"
NO_DUPLICATES = "no_duplicate_output_rows"
QUARANTINE = "quarantine_below_threshold"


def build_join_checks(ja: JoinAssets) -> list[AssetChecksDefinition]:
    spec = ja.spec

    @asset_check(asset=ja.join, name=AGREEMENT,
                 description="The most recent complete event day, recomputed with the batch form, "
                             "equals what the micro-batches wrote (compared in Spark).")
    def _agreement(spark: SparkResource, lake: LakeResource) -> AssetCheckResult:
        layout = JoinLayout.of(lake, spec)
        session = spark.get_session()
        stream_time, _ = engine.join_stream_time(session, join_root=layout.join_root)
        if stream_time is None or not engine.table_exists(layout.output):
            return AssetCheckResult(passed=True, description="nothing to compare: no micro-batch "
                                    "has written output yet")
        day = most_recent_complete_day(stream_time, spec.grace_ms)
        if day < spec.start_date:
            return AssetCheckResult(passed=True, description=f"no complete event day yet (stream "
                                    f"time {stream_time}, grace {spec.grace_ms} ms)")
        cmp = engine.compare_day_with_batch(session, spec, layout, day_key(day))
        metadata = {
            "event_day": MetadataValue.text(cmp.day),
            "rows_in_output": MetadataValue.int(cmp.rows_output),
            "rows_in_batch_form": MetadataValue.int(cmp.rows_batch),
            "only_in_output": MetadataValue.int(cmp.only_output),
            "only_in_batch_form": MetadataValue.int(cmp.only_batch),
            "stream_time": MetadataValue.int(stream_time),
        }
        if cmp.agrees:
            return AssetCheckResult(passed=True, metadata=metadata,
                                    description=f"{cmp.day}: {cmp.rows_output} rows, identical")
        return AssetCheckResult(
            passed=False, severity=AssetCheckSeverity.WARN, metadata=metadata,
            description=f"{cmp.day}: {cmp.only_output} output row(s) differ from the batch form "
                        f"({cmp.only_batch} rows only in the batch form); late data arrived after "
                        f"the micro-batches: backfill partition {cmp.day} to correct it")

    @asset_check(asset=ja.join, name=NO_DUPLICATES,
                 description="Each stream record appears at most once in the output.")
    def _no_duplicates(spark: SparkResource, lake: LakeResource) -> AssetCheckResult:
        layout = JoinLayout.of(lake, spec)
        dup = engine.duplicate_output_rows(spark.get_session(), layout.output)
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
        layout = JoinLayout.of(lake, spec)
        q = engine.quarantine_counts(spark.get_session(), layout)
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

    return [_agreement, _no_duplicates, _quarantine]
