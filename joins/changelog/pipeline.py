"""A pipeline of a one-input table operator (filter, aggregate): its input is either a
changelog source fed from a landing folder, or (`upstream`) the output changelog of another
pipeline of the lake (e.g. a count per country on top of a table-table join).

Such an operator has no batch form: its output is kept by micro-batches only (no backfill
schedule, no agreement check); `microbatch` runs the operator's step on the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import StrictBool, StrictStr, model_validator

from joins.core.time import DurationMs
from joins.core.versioned import VersionedInput
from joins.errors import ConfigError
from joins.pipeline.sources import SourceSpec, check_name
from joins.pipeline.spec import PipelineInput, PipelineLayout, PipelineSpec
from joins.pipeline.summary import BackfillSummary, CheckSummary, RunSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.incremental import IncrementalOperator

# The columns a table operator writes beside its key and values (`joins.changelog.forward`,
# the aggregate's output).
RESERVED = ("has_value", "has_old_value", "ts", "ts_utc", "tombstone", "is_latest", "event_date",
            "_batch_id", "_emit_seq", "_emit_role")


class TableOperatorPipeline(PipelineSpec):
    """Settings of a one-input table operator's pipeline.

    - `source`: a landing source (kind `changelog`), or
    - `upstream`: the name of a pipeline whose output changelog is the input (its key column:
      `upstream_key`, default `key`);
    - `versioned` / `history_retention_ms`: how the operator materialises its input.
    """

    has_batch_form: ClassVar[bool] = False

    source: SourceSpec | None = None
    upstream: StrictStr | None = None
    upstream_key: StrictStr = "key"
    versioned: StrictBool = False
    history_retention_ms: DurationMs | None = None

    @model_validator(mode="after")
    def _one_input(self) -> TableOperatorPipeline:
        if (self.source is None) == (self.upstream is None):
            raise self.error("source", "give either source (a landing source) or upstream (the name "
                             "of the pipeline whose output this one reads)")
        if self.upstream is not None:
            try:
                check_name(self.upstream)
            except ValueError as exc:
                raise self.error("upstream", str(exc)) from None
            if self.versioned:
                # Its rows are ordered per key by batch only: no arrival order to expire by.
                raise self.error("versioned", "an upstream pipeline's output is read by arrival "
                                 "(versioned: false), as Kafka's KTable#groupBy reads a join result")
        VersionedInput(versioned=self.versioned,
                       history_retention_ms=self.history_retention_ms).check(
            f"{self.operator} spec {self.name!r}")
        return self

    def pipeline_inputs(self) -> tuple[PipelineInput, ...]:
        if self.source is not None:
            return (PipelineInput("table", self.source, "changelog"),)
        return (PipelineInput("table", None, "upstream", upstream=self.upstream),)

    @property
    def key_column(self) -> str:
        return self.source.key_column if self.source is not None else self.upstream_key

    @property
    def late_horizon_ms(self) -> int:
        return self.history_retention_ms or 0

    @property
    def output_key(self) -> str:
        """The key column of the operator's output."""
        return self.key_column

    def kept_columns(self) -> tuple[str, ...]:
        return (self.output_key, *RESERVED)

    def input_name(self) -> str:
        return self.pipeline_inputs()[0].name

    def step(self, layout: PipelineLayout) -> IncrementalOperator:
        raise NotImplementedError

    def engine(self, layout: PipelineLayout) -> TableOperatorEngine:
        return TableOperatorEngine(self, layout)


def value_types(layout: PipelineLayout, columns: Sequence[str]) -> dict[str, Any]:
    """The Spark types of the input's value columns, from its Delta schema (no Spark job)."""
    from joins import lake

    path = layout.input_table("table")
    if not lake.table_exists(path):
        raise ConfigError(f"{layout.spec.name}: the input table {path!r} does not exist yet")
    schema = lake.table_schema(path)
    missing = [c for c in columns if c not in schema.fieldNames()]
    if missing:
        raise ConfigError(f"{layout.spec.name}: the input {path!r} has no column(s) {missing} "
                          f"(has {schema.fieldNames()})")
    return {c: schema[c].dataType for c in columns}


@dataclass(frozen=True)
class TableOperatorEngine:
    spec: TableOperatorPipeline
    layout: PipelineLayout

    def microbatch(self, spark: SparkSession) -> RunSummary:
        from joins import incremental

        r = incremental.run_microbatch(spark, self.spec.step(self.layout), self.layout.join,
                                       {"table": self.layout.input_table("table")})
        done = r.done
        if r.skipped or done is None:
            return RunSummary(batch_id=r.batch_id, skipped=True, skip_reason=r.skip_reason,
                              timings=dict(r.timings))
        report = done.report
        rng = r.plan.ranges["table"] if r.plan is not None else None
        counters = {k: int(v) for k, v in report.items() if isinstance(v, int) and k not in
                    ("batch_id", "rows_in", "rows_out", "stream_time")}
        return RunSummary(
            batch_id=r.batch_id, skipped=False,
            input_versions={self.spec.input_name(): None if rng is None or rng.empty
                            else (rng.first, rng.last)},
            rows_in={self.spec.input_name(): int(report["rows_in"])},
            rows_out=int(report["rows_out"]), stream_time=report.get("stream_time"),
            event_days_touched=tuple(report.get("event_days_touched", ())),
            output_version=r.commits.get("output"), counters=counters, timings=dict(r.timings))

    def backfill(self, spark: SparkSession, days: Sequence[str], *,
                 dry_run: bool = False) -> BackfillSummary:
        raise ConfigError(f"{self.spec.operator} {self.spec.name!r} has no batch form: its output "
                          f"is kept by micro-batches only, nothing to backfill")

    def runtime(self) -> Any:
        """The operator as the runtime runs it (`joins.reproduce.Runtime`); without a batch form
        its output is written by micro-batches only, which rebuild any past batch or day."""
        from joins.incremental import Source
        from joins.reproduce import Runtime

        return Runtime(self.spec.name, self.spec.step(self.layout), None, self.layout.join,
                       {"table": Source(self.layout.input_table("table"))})

    def stream_time(self) -> int | None:
        from joins.incremental import BatchLog

        done = BatchLog(self.layout.join.checkpoints, self.spec.operator).tail().last_done
        return None if done is None else done.carry.get("stream_time")

    def output_identity(self) -> tuple[str, ...]:
        return (self.spec.output_key, "_batch_id")

    def consistency(self, spark: SparkSession) -> CheckSummary:
        raise NotImplementedError
