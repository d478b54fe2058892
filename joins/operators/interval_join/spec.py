"""Configuration and input records of the `interval_join` operator (seed 003, Hazelcast's
stream-to-stream join).

Config: `join` (inner | left | right | full), `condition` (the SQL text of the ON clause),
`left_columns` / `right_columns` (the row keys of each input; a name may be qualified, `"o.time"`,
see `joins.sql.columns`), `max_buffered_rows` (optional cap on the rows held in both buffers),
`late` (`drop`, seed 003's behaviour: counted; or `quarantine`: emitted as a quarantine item with
the reason, `LATE_REASON`).

A join's output feeding another join keeps its column names: seed 003's join2 reads join1's rows
`{"l": {"o.time": ..}, "r": {"d.time": ..}}` merged into one left row, so its `left_columns` are
`["o.time", "d.time"]` and its condition says `d.time`. Watermarks are named by column
(`{"o.time": 103}`); where both inputs list the same name the output watermark is qualified by
the side (`l.time`, `r.time`), and an input watermark may use either form.
The condition is analysed when the config is validated, so a join the engine cannot bound (an
OR, a missing or non-constant time bound) is refused before any record is read.

Input: `{"i", "side": "left"|"right", "row": {...}}` or `{"i", "side", "watermark": {column: ts}}`.
A record does not know the config, so checks against the columns (unknown column, missing or
non-integer time column) are made by the processor, which names the record and the field too.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Literal

from pydantic import Field, StrictInt, StrictStr, ValidationInfo, field_validator, model_validator

from joins.core.human import duration, iso_time
from joins.errors import ConfigError, InputRecordError, config_error
from joins.spec import Record, Spec, parse_record
from joins.sql import JoinConditionPlan, Side, analyze_join_condition
from joins.sql.columns import validate_column_list

OPERATOR = "interval_join"

JoinType = Literal["inner", "left", "right", "full"]
LatePolicy = Literal["drop", "quarantine"]

# The reason of a quarantined late row, one wording for every engine (the Spark engine fills the
# same template with `format_string`).
LATE_REASON = "late {side} row: {column} {value} is below its watermark {watermark} (by {behind})"


def late_reason(side: str, column: str, value: int, watermark: int) -> str:
    """The quarantine reason of a row late for its watermark, in ISO UTC times and a duration
    (`classify.late_reason_column` spells it alike in Spark)."""
    return LATE_REASON.format(side=side, column=column, value=iso_time(value),
                              watermark=iso_time(watermark), behind=duration(watermark - value))

# Which sides get a null-padded row when they find no match.
OUTER_SIDES: dict[str, frozenset[Side]] = {
    "inner": frozenset(),
    "left": frozenset({"left"}),
    "right": frozenset({"right"}),
    "full": frozenset({"left", "right"}),
}


class IntervalJoinSpec(Spec):
    """A bounded stream-to-stream join; see the module docstring for the keys."""

    join: JoinType
    condition: StrictStr
    left_columns: tuple[StrictStr, ...]
    right_columns: tuple[StrictStr, ...]
    max_buffered_rows: StrictInt | None = Field(default=None, ge=1)
    late: LatePolicy = "drop"

    @field_validator("left_columns", "right_columns")
    @classmethod
    def _columns(cls, names: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        validate_column_list(names, info.field_name)
        return names

    @model_validator(mode="after")
    def _analyse_condition(self) -> IntervalJoinSpec:
        # ConfigError is not a ValueError, so pydantic lets it through with its own message.
        # The analysis names the setting first ("condition: ...", "left_columns: ...").
        try:
            _ = self.plan
        except ConfigError as exc:
            key, _, message = str(exc).partition(": ")
            raise config_error(OPERATOR, key, message) from None
        return self

    @cached_property
    def plan(self) -> JoinConditionPlan:
        """The analysed condition: predicate, per-side filters, time bounds, postpone times."""
        return analyze_join_condition(self.condition, self.left_columns, self.right_columns)

    @property
    def outer_sides(self) -> frozenset[Side]:
        return OUTER_SIDES[self.join]


class IntervalJoinRecord(Record):
    """One input: a row of one side, or a watermark of one of that side's columns."""

    i: StrictInt
    side: Side
    row: dict[StrictStr, Any] | None = None
    watermark: dict[StrictStr, StrictInt] | None = None


def parse_interval_join_record(raw: Any, index: int) -> IntervalJoinRecord:
    """Validate one input item; errors name the record index and the field."""
    record = parse_record(IntervalJoinRecord, raw, index=index, operator=OPERATOR)
    source = f"{OPERATOR} input"
    if (record.row is None) == (record.watermark is None):
        raise InputRecordError("needs exactly one of 'row' (a row object) or 'watermark' "
                               "({column: ts})", index=index, field="row", record=raw, source=source)
    if record.watermark is not None and len(record.watermark) != 1:
        raise InputRecordError(f"a watermark names exactly one column, got {len(record.watermark)}",
                               index=index, field="watermark", record=raw, source=source)
    return record
