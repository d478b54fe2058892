"""Bad input records found while an as-of join runs, reported as `InputRecordError`.

A duplicate (key, ts) in the table or a null ts on either side is found inside Spark: by a
`raise_error` of the SQL plans or by the JVM index (joins/spark/jvm), on the driver or in a
task. Spark then hands Python its own exception type (a `pyspark.errors` exception, or a
`Py4JJavaError` around a failed stage), with our text somewhere in its message. So every such
message is built here, from one template per problem: readable text naming the record, plus a
marker holding the problem, the key and the ts in a form that survives any wrapping. Both engines
fill the same template (the SQL plans through `sql_message`, the JVM through `jvm_template`), so a
record is named alike under every strategy; `input_record_error` reads the marker back.

The index strategy fails while `asof_join` builds it (a duplicate, a null table ts); everything
else fails when the joined DataFrame runs, in the caller's action: run it under
`input_errors()` to get the engine's error instead of Spark's.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Literal

from joins.asof.plan import OPERATOR, AsOfPlan
from joins.errors import ConfigError, InputRecordError

_MARKER = "asof-input-error"
_MARKER_RE = re.compile(_MARKER + r":([A-Za-z0-9_=-]+):(null|[0-9A-F]*):(null|[0-9A-F]*)\]")
# Placeholders of a template; the JVM fills them in Java (AsOfJoin.fill), SQL by concat.
KEY, TS, KEY_HEX, TS_HEX = "key", "ts", "key_hex", "ts_hex"


@dataclass(frozen=True)
class RecordProblem:
    """What is wrong, where: everything about a failing record but its key and ts values."""

    side: Literal["table", "stream"]
    reason: Literal["duplicate", "null_ts"]
    key_field: str
    ts_field: str
    integral_key: bool
    integral_ts: bool


def duplicate_version(plan: AsOfPlan) -> RecordProblem:
    return RecordProblem("table", "duplicate", plan.table_key, plan.table_ts, plan.integral_keys,
                         plan.ts_kind == "integral")


def null_ts(plan: AsOfPlan, side: Literal["table", "stream"]) -> RecordProblem:
    key = plan.table_key if side == "table" else plan.lookup_key
    ts = plan.table_ts if side == "table" else plan.stream_ts
    return RecordProblem(side, "null_ts", key, ts, plan.integral_keys, plan.ts_kind == "integral")


Piece = tuple[bool, str]  # (is a placeholder, text)


def _describe(problem: RecordProblem, key: Piece, ts: Piece) -> list[Piece]:
    """The readable message, with the record's key and ts given as pieces."""
    k, t = problem.key_field, problem.ts_field
    if problem.reason == "duplicate":
        return [(False, f"the table holds two versions with the same ({k}, {t}) = ("), key,
                (False, ", "), ts, (False, "); a versioned table keeps one row per (key, ts)")]
    return [(False, f"{problem.side} record with null field {t!r} ({problem.side}_ts), {k} = "), key,
            (False, ": a record that cannot be placed in time is never dropped")]


def _encode(problem: RecordProblem) -> str:
    return base64.urlsafe_b64encode(json.dumps(asdict(problem)).encode()).decode()


def _template(problem: RecordProblem) -> list[Piece]:
    """The raw message Spark carries: operator, readable text, marker."""
    parts = [(False, f"{OPERATOR}: "), *_describe(problem, (True, KEY), (True, TS))]
    parts += [(False, f" [{_MARKER}:{_encode(problem)}:"), (True, TS_HEX), (False, ":"),
              (True, KEY_HEX), (False, "]")]
    return parts


def jvm_template(problem: RecordProblem) -> list[str]:
    """The template for the JVM: literal and placeholder pieces alternating, literal first (a
    list, not one string with placeholders: a column name may contain anything)."""
    out = [""]
    for is_placeholder, text in _template(problem):
        if is_placeholder:
            out += [text, ""]
        else:
            out[-1] += text
    return out


def sql_message(problem: RecordProblem, key_sql: str, ts_sql: str) -> str:
    """A SQL expression for the raw message; key_sql / ts_sql are the record's key and ts as
    they print (CAST ... AS STRING), null allowed."""
    key, ts = f"coalesce({key_sql}, 'null')", f"coalesce({ts_sql}, 'null')"
    fill = {KEY: key, TS: ts, KEY_HEX: f"coalesce(hex({key_sql}), 'null')",
            TS_HEX: f"coalesce(hex({ts_sql}), 'null')"}
    return "concat(" + ", ".join(fill[text] if is_placeholder else sql_string(text)
                                 for is_placeholder, text in _template(problem)) + ")"


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _unhex(text: str) -> str | None:
    return None if text == "null" else bytes.fromhex(text).decode("utf-8", errors="replace")


def _value(text: str | None, integral: bool) -> Any:
    return int(text) if integral and text is not None else text


def _decode(match: re.Match[str]) -> InputRecordError:
    fields = json.loads(base64.urlsafe_b64decode(match.group(1)))
    problem = RecordProblem(**fields)
    ts, key = _unhex(match.group(2)), _unhex(match.group(3))
    pieces = _describe(problem, (False, "null" if key is None else key),
                       (False, "null" if ts is None else ts))
    message = "".join(text for _, text in pieces)
    record = {problem.key_field: _value(key, problem.integral_key),
              problem.ts_field: _value(ts, problem.integral_ts)}
    return InputRecordError(message, field=problem.ts_field, record=record,
                            source=f"{OPERATOR} {problem.side}")


def _java_throwable(exc: BaseException) -> Any:
    # Py4JJavaError holds it as java_exception, PySpark's converted exceptions as _origin.
    return getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)


def _texts(exc: BaseException) -> Iterator[str]:
    """The exception's text, then each Java cause's (a failed task's error is a cause, or is in
    the stage failure's message)."""
    try:
        text = str(exc)
    except Exception:  # py4j cannot always render a Java error (e.g. the gateway is gone)
        text = ""
    yield text
    java = _java_throwable(exc)
    for _ in range(20):
        if java is None:
            return
        try:
            yield str(java.toString())
            java = java.getCause()
        except Exception:
            return


def input_record_error(exc: BaseException) -> InputRecordError | None:
    """The InputRecordError that a Spark failure of an as-of join carries, or None."""
    if isinstance(exc, InputRecordError):
        return exc
    for text in _texts(exc):
        match = _MARKER_RE.search(text)
        if match is not None:
            return _decode(match)
    return None


class HashCollision(Exception):
    """Two table keys share a 64-bit hash (astronomically rare): use a plan without the index."""


_INDEX_LIMIT_RE = re.compile(r"as-of index: [^\n]*")


def engine_error(exc: BaseException) -> BaseException:
    """A failure of an as-of join as the engine's error where it is one of ours (a bad record, a
    hash collision, a table too big to index), else unchanged."""
    found = input_record_error(exc)
    if found is not None:
        return found
    for text in _texts(exc):
        if "HASH_COLLISION" in text:
            return HashCollision(text)
        limit = _INDEX_LIMIT_RE.search(text)
        if limit is not None:
            return ConfigError(f"{OPERATOR}: {limit.group(0)}")
    return exc


@contextmanager
def input_errors() -> Iterator[None]:
    """Run an action on an as-of join's result (collect, write, count) under this to get the
    engine's InputRecordError for a bad input record instead of Spark's exception."""
    try:
        yield
    except InputRecordError:
        raise
    except Exception as exc:
        found = input_record_error(exc)
        if found is None:
            raise
        # The Spark error stays reachable as __context__; its JVM trace is pages long.
        raise found from None
