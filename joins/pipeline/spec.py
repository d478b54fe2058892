"""What every pipeline spec has: a join (any operator) over sources fed from landing folders,
as Dagster assets partitioned by event day.

A spec is a pydantic model whose `operator` field says which join it is; `registry.py` makes
the union of every operator's spec class, discriminated by `operator`, and YAML spec files are
parsed into it (`files.py`). The spec names its inputs (`pipeline_inputs`) and gives the engine
that runs it (`engine`): that is all the Dagster layer needs to build its assets, jobs,
sensors, schedule and checks.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import Field, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from joins.errors import ConfigError, config_error
from joins.incremental.layout import JoinRoot
from joins.incremental.projection import OutputValue, Projection
from joins.pipeline.select import SelectedColumn, projection_of, select_problem, select_shorthand
from joins.pipeline.sources import SourceSpec, check_name
from joins.spec import Spec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from joins.ingest import IngestSource
    from joins.pipeline.summary import BackfillSummary, CheckSummary, RunSummary

# How an input's landing files are stored: a versioned table (the seed rules applied at ingest:
# out-of-order history, expiry beyond history retention), an append-only events table, or a
# changelog (every update in arrival order with its tombstone flag; the operator versions it).
InputKind = Literal["versioned", "events", "changelog", "upstream"]
_INGEST_KIND: dict[str, str] = {"versioned": "table", "events": "stream", "changelog": "changelog"}


@dataclass(frozen=True)
class PipelineInput:
    """One input of a pipeline's join: a source fed from its landing folder, or (`upstream`)
    the output of another pipeline of the same lake (no landing, no ingest of its own)."""

    role: str                         # the operator's input role ("stream", "table", "left", ...)
    source: SourceSpec | None
    kind: InputKind
    history_retention_ms: int | None = None   # versioned inputs only
    upstream: str | None = None               # the pipeline whose output this input reads

    @property
    def name(self) -> str:
        """The asset this input is: the source's, or the upstream pipeline's join asset."""
        if self.source is not None:
            return self.source.name
        assert self.upstream is not None
        return self.upstream


class PipelineSpec(Spec):
    """Settings every pipeline has.

    - `operator`: which join (the discriminator of the spec union);
    - `name`: the join asset (partitioned by event day) and its Delta folder;
    - `start_date`: the first event day (first partition) of the join asset;
    - `backfill_horizon_days`: the nightly schedule re-computes this many event days, ending at
      the join's stream time (late data older than that cannot change the output any more);
    - `backfill_cron`: when that schedule runs (UTC);
    - `quarantine_threshold`: the largest share of quarantined input rows the quarantine check
      accepts (0.05 = 5 %);
    - `sensor_interval_s`: how often the sensors look for new files and new Delta versions;
    - `check_interval_s`: how often, at most, the staleness sensor runs the agreement check
      after micro-batches wrote (each run is a Spark job over the late-data horizon);
    - `select`: the value columns the output publishes, renamed where `as` says
      (`joins.pipeline.select`; default: all).
    """

    # An operator without a batch form (its output is kept by micro-batches only) gets no
    # backfill schedule and no backfill-agreement check.
    has_batch_form: ClassVar[bool] = True

    operator: str
    name: StrictStr
    description: StrictStr | None = None
    start_date: dt.date
    backfill_horizon_days: StrictInt = Field(default=3, ge=1, le=366)
    backfill_cron: StrictStr = "0 3 * * *"
    quarantine_threshold: StrictFloat | StrictInt = Field(default=0.05, ge=0, le=1)
    sensor_interval_s: StrictInt = Field(default=30, ge=1)
    check_interval_s: StrictInt = Field(default=600, ge=1)
    select: tuple[SelectedColumn, ...] | None = None

    _select_shorthand = field_validator("select", mode="before")(classmethod(
        lambda cls, raw: select_shorthand(raw)))

    @field_validator("name")
    @classmethod
    def _name_is_usable(cls, name: str) -> str:
        return check_name(name)

    @model_validator(mode="after")
    def _names_are_distinct(self) -> PipelineSpec:
        names = {"name": self.name, **{f"{i.role}.name": i.source.name for i in self.pipeline_inputs()
                                       if i.source is not None}}
        seen: set[str] = set()
        for key, value in names.items():
            if value in seen:
                raise self.error(key, f"the join and its sources need different names, got {names}")
            seen.add(value)
        return self

    @model_validator(mode="after")
    def _select_is_publishable(self) -> PipelineSpec:
        if self.select is not None:
            try:
                values = self.output_values()
            except (ConfigError, ValueError):
                return self   # the operator's own validation, which runs next, says what is wrong
            problem = select_problem(self.select, values, self.kept_columns())
            if problem is not None:
                raise self.error(*problem)
        return self

    def output_values(self) -> tuple[OutputValue, ...]:
        """The value columns of the operator's output: what `select` may publish."""
        raise NotImplementedError

    def kept_columns(self) -> tuple[str, ...]:
        """The output's columns besides its values (key, event time, lineage)."""
        raise NotImplementedError

    def projection(self) -> Projection | None:
        """What the runtime publishes of the output's value columns (None: all of them)."""
        return None if self.select is None else projection_of(self.select, self.output_values())

    def error(self, key: str, message: str) -> ConfigError:
        return config_error(f"{self.operator} spec {self.name!r}", key, message)

    def pipeline_inputs(self) -> tuple[PipelineInput, ...]:
        raise NotImplementedError

    def input(self, role: str) -> PipelineInput:
        return next(i for i in self.pipeline_inputs() if i.role == role)

    @property
    def late_horizon_ms(self) -> int:
        """How far behind stream time late data can still change the output."""
        raise NotImplementedError

    def hold_back_ms(self) -> int:
        """How long the join holds records back for out-of-order data (a grace period): the
        latest complete event day is the one entirely behind stream time minus this."""
        return 0

    def held_back_table(self, layout: PipelineLayout) -> str | None:
        """The Delta table of the records the join holds back (a grace buffer), None when it
        holds nothing back: what the UI shows as the pipeline's buffer."""
        return None

    def summary(self) -> str:
        """One sentence for the join asset's description."""
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        """The join's settings as plain values (asset metadata)."""
        raise NotImplementedError

    def engine(self, layout: PipelineLayout) -> PipelineEngine:
        raise NotImplementedError

    def consistency_check(self) -> tuple[str, str] | None:
        """(name, description) of the operator's own asset check, which the engine runs as
        `consistency(spark)`; None: the operator has none."""
        return None


# Where a pipeline's data lives under the lake root.
#
#     <root>/landing/<source>        landing files (unless the source names another folder)
#     <root>/tables/<source>         the source's Delta table (versioned table or events table)
#     <root>/quarantine/<source>     input rows not stored, with the reason
#     <root>/manifests/<source>      which landing files each ingest batch took
#     <root>/leases/<source>         the ingest's writer lease (one ingest of a source at a time)
#     <root>/catalog/<source>        where a catalog-named Delta source was resolved (its location)
#     <root>/joins/<join>/           the join (joins.incremental.layout): output, quarantine,
#                                    state, checkpoints, lease


@dataclass(frozen=True)
class SourceLayout:
    """Absolute paths (or URIs) of a source's folders and Delta tables under the lake root:
    a source's place does not depend on the pipelines that read it (shared sources)."""

    root: str

    def _under(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def landing(self, source: SourceSpec) -> str:
        """The landing folder or Delta table; a catalog table's location as its last ingest
        run resolved it (`catalog:<name>` before the first: joins.ingest.catalog)."""
        if source.catalog_table is not None:
            from joins.ingest.catalog import recorded, unresolved_landing

            found = recorded(self.catalog_record(source))
            return found.location if found is not None else unresolved_landing(source.catalog_table)
        if source.landing is None:
            return self._under("landing", source.name)
        if "://" in source.landing or os.path.isabs(source.landing):
            return source.landing.rstrip("/")
        return self._under(*source.landing.strip("/").split("/"))

    def table(self, source: SourceSpec) -> str:
        return self._under("tables", source.name)

    def quarantine(self, source: SourceSpec) -> str:
        return self._under("quarantine", source.name)

    def manifest(self, source: SourceSpec) -> str:
        return self._under("manifests", source.name)

    def lease(self, source: SourceSpec) -> str:
        return self._under("leases", source.name)

    def catalog_record(self, source: SourceSpec) -> str:
        return self._under("catalog", source.name)

    def ingest_source(self, item: PipelineInput) -> IngestSource:
        """The ingest engine's view of one input (a source and how it is stored)."""
        from joins.ingest import IngestSource

        source = item.source
        assert source is not None, f"{item.role} is the output of {item.upstream}: nothing to ingest"
        versioned = item.kind == "versioned"
        return IngestSource(
            name=source.name, kind=_INGEST_KIND[item.kind], landing=self.landing(source),  # type: ignore[arg-type]
            spec=source.landing_spec(), table=self.table(source),
            quarantine=self.quarantine(source), manifest=self.manifest(source),
            lease=self.lease(source), catalog_table=source.catalog_table,
            catalog_record=None if source.catalog_table is None else self.catalog_record(source),
            history_retention_ms=item.history_retention_ms if versioned else None)


@dataclass(frozen=True)
class PipelineLayout(SourceLayout):
    """Absolute paths (or URIs) of every folder and Delta table of one pipeline spec."""

    spec: PipelineSpec

    def input_table(self, role: str) -> str:
        item = self.spec.input(role)
        if item.source is None:
            assert item.upstream is not None
            return self._under("joins", item.upstream, "output")
        return self.table(item.source)

    @property
    def join(self) -> JoinRoot:
        """The join's tables, and the columns its output publishes (`select`)."""
        return JoinRoot(self._under("joins", self.spec.name), self.spec.projection())

    @property
    def join_root(self) -> str:
        return self.join.root

    @property
    def output(self) -> str:
        return self.join.output

    @property
    def join_quarantine(self) -> str:
        return self.join.quarantine

    def quarantine_tables(self) -> dict[str, str]:
        """Every quarantine table of the pipeline, by what it holds: each source's bad and
        expired rows, then the join's (late records under `late: quarantine`)."""
        out = {i.source.name: self.quarantine(i.source) for i in self.spec.pipeline_inputs()
               if i.source is not None}   # an upstream pipeline's output: its own quarantine
        out[self.spec.name] = self.join_quarantine
        return out


class PipelineEngine(Protocol):
    layout: PipelineLayout

    def microbatch(self, spark: SparkSession) -> RunSummary: ...

    def backfill(self, spark: SparkSession, days: Sequence[str], *,
                 dry_run: bool = False) -> BackfillSummary: ...

    def stream_time(self) -> int | None: ...

    def output_identity(self) -> tuple[str, ...]:
        """The columns that identify an output row (each identity appears at most once)."""
        ...

    def consistency(self, spark: SparkSession) -> CheckSummary:
        """The operator's own check (`PipelineSpec.consistency_check`), where it has one."""
        ...
