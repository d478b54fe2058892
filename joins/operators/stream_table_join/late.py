"""The reason a late stream record is quarantined (KIP-923: older than stream time - grace),
word for word the reference processor's, as text and as a Spark expression."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

# Sentinel numbers fed to the reference processor to read its quarantine reason as a template:
# distinct, and unlike any other number the text could hold.
_S_GRACE, _S_STREAM_TIME, _S_TS = 7919, 1_000_003, 11


@functools.cache
def _late_reason_template() -> str:
    """The reference processor's quarantine reason with `{ts}`, `{st}`, `{grace}`, `{bound}`
    and `{needed}` in place of the numbers: the Spark expression and the reference then word
    their reasons identically, whatever the wording is."""
    from joins.operators.stream_table_join.reference import StreamTableJoinProcessor
    from joins.operators.stream_table_join.spec import StreamTableJoinSpec, StreamTableRecord

    spec = StreamTableJoinSpec.model_validate(
        {"join": "left", "table": {"versioned": True, "history_retention_ms": _S_GRACE},
         "grace_ms": _S_GRACE, "late": "quarantine"})
    processor = StreamTableJoinProcessor(spec)
    processor.process(StreamTableRecord(i=0, side="stream", key="k", value="v", ts=_S_STREAM_TIME))
    items = processor.process(StreamTableRecord(i=1, side="stream", key="k", value="v", ts=_S_TS))
    text = str(items[0]["reason"]).replace("{", "{{").replace("}", "}}")
    names = {_S_TS: "{ts}", _S_STREAM_TIME: "{st}", _S_GRACE: "{grace}",
             _S_STREAM_TIME - _S_GRACE: "{bound}", _S_STREAM_TIME - _S_TS: "{needed}"}
    return re.sub(r"-?\d+", lambda m: names.get(int(m.group()), m.group()), text)


def late_reason_text(ts: int, stream_time: int, grace_ms: int) -> str:
    """The quarantine reason of a late record, word for word the reference processor's."""
    return _late_reason_template().format(ts=ts, st=stream_time, grace=grace_ms,
                                          bound=stream_time - grace_ms, needed=stream_time - ts)


def late_reason(ts: Column, stream_time: Column, grace_ms: int) -> Column:
    """`late_reason_text` as a Spark expression."""
    from pyspark.sql import functions as F

    fmt = _late_reason_template().replace("%", "%%").format(
        ts="%1$d", st="%2$d", grace=grace_ms, bound="%3$d", needed="%4$d")
    return F.format_string(fmt, ts, stream_time, stream_time - F.lit(grace_ms), stream_time - ts)
