"""Join specs: what a user declares to get a versioned table, a stream and their temporal join as
Dagster assets.

A `JoinSpec` names two sources, each fed from a landing folder of JSON-lines / CSV / Parquet files
with a declared schema (key column, value columns, event-time column), and the stream-table join
between them (seeds 000/001): join type, the table's history retention, the stream side's grace
period and late policy, and an optional `table_key` (a stream value column naming the table key).

Validation is strict (unknown keys are errors) and every error is a `ConfigError` naming the key,
e.g. `join spec 'orders_with_rates': invalid config: config.grace_ms: ...`.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal

from pydantic import Field, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from joins.errors import ConfigError, config_error
from joins.landing.spec import BadRecordPolicy, ColumnSpec, LandingFormat, LandingSpec
from joins.operators.stream_table_join.spec import LatePolicy, StreamTableJoinSpec
from joins.spec import Spec, parse_spec

OPERATOR = "join spec"
DAY_MS = 86_400_000

# Asset keys, Delta folders and Dagster job names are built from these names.
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        # A ValueError: pydantic reports it under the field's own path (config.stream.name).
        raise ValueError("must be a lower-case identifier (a-z, 0-9, _): it names an asset, a "
                         "Dagster job and a Delta folder")
    return name


def _error(spec_name: str | None, key: str, message: str) -> ConfigError:
    return config_error(f"{OPERATOR} {spec_name!r}" if spec_name else OPERATOR, key, message)


class SourceSpec(Spec):
    """One source: a landing folder and the declared schema of its files.

    - `name`: the asset name and the source id of its ingest commits (lower-case identifier);
    - `landing`: the landing folder; a relative path is under the lake root (default
      `landing/<name>`);
    - `format`: `jsonl`, `csv` or `parquet`;
    - `key_columns`, `value_columns`, `ts_column` (event time, integer ms), `tombstone_column`
      (table sources only; absent = all value columns null means delete);
    - `on_bad_record`: `quarantine` (default: bad rows go to the quarantine table with the
      reason) or `fail` (the batch is refused, naming the file, the row and the field).
    """

    name: StrictStr
    landing: StrictStr | None = None
    format: LandingFormat
    key_columns: tuple[ColumnSpec, ...] = Field(min_length=1)
    value_columns: tuple[ColumnSpec, ...] = ()
    ts_column: StrictStr
    tombstone_column: StrictStr | None = None
    on_bad_record: BadRecordPolicy = "quarantine"
    description: StrictStr | None = None

    @field_validator("name")
    @classmethod
    def _name_is_usable(cls, name: str) -> str:
        return _check_name(name)

    @property
    def key_column(self) -> str:
        return self.key_columns[0].name

    @property
    def value_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.value_columns)

    def landing_spec(self) -> LandingSpec:
        """The engine's landing schema (joins.landing) for this source's files."""
        return LandingSpec.parse({
            "format": self.format,
            "key_columns": [c.model_dump() for c in self.key_columns],
            "value_columns": [c.model_dump() for c in self.value_columns],
            "ts_column": self.ts_column,
            "tombstone_column": self.tombstone_column,
            "on_bad_record": self.on_bad_record,
        })


class JoinSpec(Spec):
    """A stream enriched with the version of a versioned table valid at each event's time.

    - `name`: the join asset (partitioned by event day) and its Delta folder;
    - `stream`, `table`: the two sources (one key column each: the join key);
    - `join`: `inner` | `left`; `history_retention_ms`: how much event-time history the table
      keeps (also its grace for late table updates); `grace_ms`: how long stream records wait
      for out-of-order table updates (null = joined on arrival); `late`: `join` | `drop` |
      `quarantine` for stream records older than stream time - grace; `table_key`: a stream value
      column holding the table key (absent = the stream key);
    - `start_date`: the first event day (first partition) of the join asset;
    - `backfill_horizon_days`: the nightly schedule re-computes this many event days, ending at
      the join's stream time (late data older than that cannot change the output any more);
    - `backfill_cron`: when that schedule runs (UTC);
    - `quarantine_threshold`: the largest share of quarantined input rows the quarantine check
      accepts (0.05 = 5 %);
    - `sensor_interval_s`: how often the sensors look for new files and new Delta versions.
    """

    name: StrictStr
    description: StrictStr | None = None
    stream: SourceSpec
    table: SourceSpec
    join: Literal["inner", "left"] = "left"
    history_retention_ms: StrictInt = Field(ge=0)
    grace_ms: StrictInt | None = Field(default=None, ge=0)
    late: LatePolicy = "join"
    table_key: StrictStr | None = None
    start_date: dt.date
    backfill_horizon_days: StrictInt = Field(default=3, ge=1, le=366)
    backfill_cron: StrictStr = "0 3 * * *"
    quarantine_threshold: StrictFloat | StrictInt = Field(default=0.05, ge=0, le=1)
    sensor_interval_s: StrictInt = Field(default=30, ge=1)

    @field_validator("name")
    @classmethod
    def _name_is_usable(cls, name: str) -> str:
        return _check_name(name)

    @model_validator(mode="after")
    def _consistent(self) -> JoinSpec:
        name = self.name
        names = {"name": name, "stream.name": self.stream.name, "table.name": self.table.name}
        if len(set(names.values())) != len(names):
            raise _error(name, "table.name", f"the join, the stream and the table need three "
                         f"different names, got {names}")
        for side, src in (("stream", self.stream), ("table", self.table)):
            if len(src.key_columns) != 1:
                raise _error(name, f"{side}.key_columns", f"the stream-table join joins on one key "
                             f"column, got {len(src.key_columns)} ({[c.name for c in src.key_columns]})")
        if self.stream.tombstone_column is not None:
            raise _error(name, "stream.tombstone_column", "a stream has no deletes (a stream "
                         "record whose value columns are all null is skipped by the join)")
        lookup = self._lookup_column()
        if lookup.type != self.table.key_columns[0].type:
            raise _error(name, "table_key" if self.table_key else "stream.key_columns",
                         f"the stream's lookup column {lookup.name!r} is {lookup.type} but the table "
                         f"key {self.table.key_column!r} is {self.table.key_columns[0].type}")
        clash = set(self.stream.value_names) & {f"table_{c}" for c in self.table.value_names}
        if clash:
            raise _error(name, "stream.value_columns", f"column(s) {sorted(clash)} would collide "
                         f"with the table's value columns in the output (they get a table_ prefix)")
        # The engine spec repeats grace/retention/late checks with its own key names; running
        # ours first keeps the keys of this spec in the message.
        if self.grace_ms is not None and self.grace_ms > self.history_retention_ms:
            raise _error(name, "grace_ms", f"grace_ms ({self.grace_ms}) must be <= "
                         f"history_retention_ms ({self.history_retention_ms}): a buffered record "
                         f"would be looked up in history the table no longer keeps")
        if self.grace_ms is None and self.late != "join":
            raise _error(name, "late", f"late = {self.late!r} needs grace_ms: without a stream "
                         f"buffer no record is ever late, so the setting would do nothing")
        self.engine_spec()
        return self

    def _lookup_column(self) -> ColumnSpec:
        if self.table_key is None:
            return self.stream.key_columns[0]
        for col in self.stream.value_columns:
            if col.name == self.table_key:
                return col
        raise _error(self.name, "table_key", f"{self.table_key!r} is not a value column of the "
                     f"stream {self.stream.name!r} (has {list(self.stream.value_names)})")

    def engine_spec(self) -> StreamTableJoinSpec:
        """The engine's operator spec (joins.operators.stream_table_join)."""
        return StreamTableJoinSpec.model_validate({
            "join": self.join,
            "table": {"versioned": True, "history_retention_ms": self.history_retention_ms},
            "grace_ms": self.grace_ms,
            "late": self.late,
            "table_key": self.table_key,
        })

    @property
    def late_horizon_ms(self) -> int:
        """How far behind stream time data can still change the output: late table updates are
        stored within history retention, late stream records are still joined (late = join)."""
        return max(self.history_retention_ms, self.grace_ms or 0)


def parse_join_spec(config: Any) -> JoinSpec:
    """Validate a join spec (a dict, e.g. from YAML/JSON, or a JoinSpec); raises ConfigError."""
    if isinstance(config, JoinSpec):
        return config
    name = config.get("name") if isinstance(config, dict) else None
    operator = f"{OPERATOR} {name!r}" if isinstance(name, str) and name else OPERATOR
    return parse_spec(JoinSpec, config, operator=operator)
