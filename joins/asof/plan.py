"""The validated settings of one as-of join: what every strategy (index, shuffled index,
broadcast, shuffle) is generated from, and the one place that checks a join's configuration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from joins.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

OPERATOR = "asof_join"
JoinHow = Literal["inner", "left"]
Strategy = Literal["auto", "index", "index_shuffle", "broadcast", "shuffle"]
# Timestamps (with or without time zone) are compared as microseconds since the epoch.
TsKind = Literal["integral", "timestamp"]

DEFAULT_VERSIONS_PER_BUCKET = 2
# Above this estimated table size the auto strategy shuffles instead of broadcasting.
DEFAULT_BROADCAST_MAX_BYTES = 256 * 1024 * 1024
# Internal columns start with this; user columns may not.
RESERVED_PREFIX = "__asof_"
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class AsOfPlan:
    """Validated settings of one as-of join."""

    stream_columns: tuple[str, ...]
    lookup_key: str
    stream_ts: str
    table_key: str
    table_ts: str
    value_cols: tuple[str, ...]
    tombstone_col: str | None
    valid_from_col: str | None
    ts_kind: TsKind
    table_ts_type: str  # Spark SQL type name of table_ts
    how: JoinHow
    versions_per_bucket: int
    history_retention_ms: int | None
    table_stream_time: int | None
    integral_keys: bool  # both keys are integers: the JVM index keys on them as they are

    @property
    def time_unit(self) -> int:
        """Retention and stream time are given in ms; timestamps are compared in micros."""
        return 1 if self.ts_kind == "integral" else 1000


def saturate(value: int) -> int:
    """value clamped to the long range: a bound past either end means the same as that end."""
    return max(LONG_MIN, min(LONG_MAX, value))


def config_error(key: str, message: str) -> ConfigError:
    return ConfigError(f"{OPERATOR}: invalid config: {key}: {message}")


def _ts_kind(schema: StructType, col: str, key: str) -> TsKind:
    from pyspark.sql.types import (
        ByteType,
        IntegerType,
        LongType,
        ShortType,
        TimestampNTZType,
        TimestampType,
    )

    dtype = schema[col].dataType
    if isinstance(dtype, ByteType | ShortType | IntegerType | LongType):
        return "integral"
    if isinstance(dtype, TimestampType | TimestampNTZType):
        return "timestamp"
    raise config_error(key, f"column {col!r} must be an integer (epoch ms) or a timestamp, "
                            f"got {dtype.simpleString()}")


def _is_integral(schema: StructType, col: str) -> bool:
    return schema[col].dataType.typeName() in ("byte", "short", "integer", "long")


def _require_column(columns: Sequence[str], col: str, key: str, side: str) -> None:
    if col not in columns:
        raise config_error(key, f"no column {col!r} in the {side} (columns: {', '.join(columns)})")


def _check_settings(how: str, strategy: str, history_retention_ms: int | None,
                    table_stream_time: int | None, versions_per_bucket: int) -> None:
    if how not in ("inner", "left"):
        raise config_error("how", f"must be 'inner' or 'left', got {how!r}")
    if strategy not in ("auto", "index", "index_shuffle", "broadcast", "shuffle"):
        raise config_error("strategy", f"must be 'auto', 'index', 'index_shuffle', 'broadcast' or "
                                       f"'shuffle', got {strategy!r}")
    if history_retention_ms is not None and history_retention_ms < 0:
        raise config_error("history_retention_ms", f"must be >= 0, got {history_retention_ms}")
    if table_stream_time is not None and history_retention_ms is None:
        raise config_error("table_stream_time", "only means something with history_retention_ms")
    if versions_per_bucket < 1:
        raise config_error("versions_per_bucket", f"must be >= 1, got {versions_per_bucket}")


def _check_output(out: Sequence[str], table_cols: Sequence[str]) -> None:
    lowered = [c.lower() for c in out]  # Spark resolves names case-insensitively by default
    clashes = sorted({c for c in out if lowered.count(c.lower()) > 1})
    if clashes:
        raise config_error("table_value_cols", f"output column(s) {clashes} would appear twice; "
                                               "rename them, or choose table_value_cols / "
                                               "valid_from_col")
    if any(c.startswith(RESERVED_PREFIX) for c in [*out, *table_cols]):
        raise config_error("table_value_cols", f"column names starting with {RESERVED_PREFIX!r} "
                                               "are reserved")


def validate(stream_schema: StructType, table_schema: StructType, *, stream_key: str, stream_ts: str,
             table_key: str, table_ts: str, how: str, table_value_cols: Sequence[str] | None,
             history_retention_ms: int | None, table_stream_time: int | None,
             tombstone_col: str | None, table_key_from: str | None, valid_from_col: str | None,
             versions_per_bucket: int, strategy: str) -> AsOfPlan:
    """The join's plan, or a ConfigError naming the offending setting."""
    _check_settings(how, strategy, history_retention_ms, table_stream_time, versions_per_bucket)
    stream_cols, table_cols = stream_schema.fieldNames(), table_schema.fieldNames()
    _require_column(stream_cols, stream_key, "stream_key", "stream")
    _require_column(stream_cols, stream_ts, "stream_ts", "stream")
    _require_column(table_cols, table_key, "table_key", "table")
    _require_column(table_cols, table_ts, "table_ts", "table")
    if table_key_from is not None:
        _require_column(stream_cols, table_key_from, "table_key_from", "stream")
    if tombstone_col is not None:
        _require_column(table_cols, tombstone_col, "tombstone_col", "table")
        if table_schema[tombstone_col].dataType.typeName() != "boolean":
            raise config_error("tombstone_col", f"column {tombstone_col!r} must be boolean")
    lookup_key = table_key_from if table_key_from is not None else stream_key
    integral_keys = _is_integral(stream_schema, lookup_key) and _is_integral(table_schema, table_key)
    stream_kind = _ts_kind(stream_schema, stream_ts, "stream_ts")
    table_kind = _ts_kind(table_schema, table_ts, "table_ts")
    if stream_kind != table_kind:
        raise config_error("stream_ts", f"stream ts {stream_ts!r} is {stream_kind} but table ts "
                                        f"{table_ts!r} is {table_kind}; they must compare")
    if table_value_cols is None:
        reserved = {table_key, table_ts, tombstone_col}
        values = tuple(c for c in table_cols if c not in reserved)
    else:
        for col in table_value_cols:
            _require_column(table_cols, col, "table_value_cols", "table")
        values = tuple(table_value_cols)
    _check_output([*stream_cols, *values, *([valid_from_col] if valid_from_col else [])], table_cols)
    return AsOfPlan(
        stream_columns=tuple(stream_cols),
        lookup_key=lookup_key, integral_keys=integral_keys,
        stream_ts=stream_ts, table_key=table_key, table_ts=table_ts, value_cols=values,
        tombstone_col=tombstone_col, valid_from_col=valid_from_col, ts_kind=table_kind,
        table_ts_type=table_schema[table_ts].dataType.simpleString(),
        how=how,  # type: ignore[arg-type]
        versions_per_bucket=versions_per_bucket, history_retention_ms=history_retention_ms,
        table_stream_time=table_stream_time)


def table_only_plan(table_schema: StructType, *, table_key: str, table_ts: str,
                    tombstone_col: str | None, versions_per_bucket: int) -> AsOfPlan:
    """The plan of the table side alone (bucket inspection): the table joined with itself."""
    return validate(table_schema, table_schema, stream_key=table_key, stream_ts=table_ts,
                    table_key=table_key, table_ts=table_ts, how="inner", table_value_cols=[],
                    history_retention_ms=None, table_stream_time=None, tombstone_col=tombstone_col,
                    table_key_from=None, valid_from_col=None, versions_per_bucket=versions_per_bucket,
                    strategy="shuffle")
