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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from joins.errors import ConfigError, config_error
from joins.pipeline.sources import SourceSpec, check_name
from joins.spec import Spec

if TYPE_CHECKING:
    from joins.pipeline.engine import PipelineEngine
    from joins.pipeline.layout import PipelineLayout

# How an input's landing files are stored: a versioned table (the seed rules applied at ingest:
# out-of-order history, expiry beyond history retention) or an append-only events table.
InputKind = Literal["versioned", "events"]


@dataclass(frozen=True)
class PipelineInput:
    role: str                         # the operator's input role ("stream", "table", "left", ...)
    source: SourceSpec
    kind: InputKind
    history_retention_ms: int | None = None   # versioned inputs only


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
    - `sensor_interval_s`: how often the sensors look for new files and new Delta versions.
    """

    operator: str
    name: StrictStr
    description: StrictStr | None = None
    start_date: dt.date
    backfill_horizon_days: StrictInt = Field(default=3, ge=1, le=366)
    backfill_cron: StrictStr = "0 3 * * *"
    quarantine_threshold: StrictFloat | StrictInt = Field(default=0.05, ge=0, le=1)
    sensor_interval_s: StrictInt = Field(default=30, ge=1)

    @field_validator("name")
    @classmethod
    def _name_is_usable(cls, name: str) -> str:
        return check_name(name)

    @model_validator(mode="after")
    def _names_are_distinct(self) -> PipelineSpec:
        names = {"name": self.name, **{f"{i.role}.name": i.source.name for i in self.pipeline_inputs()}}
        seen: set[str] = set()
        for key, value in names.items():
            if value in seen:
                raise self.error(key, f"the join and its sources need different names, got {names}")
            seen.add(value)
        return self

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

    def summary(self) -> str:
        """One sentence for the join asset's description."""
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        """The join's settings as plain values (asset metadata)."""
        raise NotImplementedError

    def engine(self, layout: PipelineLayout) -> PipelineEngine:
        raise NotImplementedError
