"""The generic as-of (temporal) join on Spark: every stream row joined to the version of a
versioned table valid at its ts (seed 000's get(key, ts)). A building block: the versioned
table's `lookup_as_of` and the stream-table join's table side both run on it.

Modules: `plan` (settings and their validation), `join` (`asof_join` and the strategy choice),
`index` (the JVM version index, joins/spark/jvm: broadcast, or one per partition), `held` (that
index kept from one micro-batch to the next, in layers), `window` (the part of a large table that
is held), `sql` (the bucketed-interval SQL plans), `errors` (bad records as InputRecordError
under every strategy).
docs/asof_join.md.
"""

from joins.asof.errors import input_errors, input_record_error
from joins.asof.held import HELD_MAX_ROWS, HeldJoin, HeldTable
from joins.asof.join import asof_join, bucket_stats, held_asof_join, versions_by_bucket
from joins.asof.plan import (
    DEFAULT_BROADCAST_MAX_BYTES,
    DEFAULT_VERSIONS_PER_BUCKET,
    JoinHow,
    Strategy,
)

__all__ = [
    "DEFAULT_BROADCAST_MAX_BYTES",
    "DEFAULT_VERSIONS_PER_BUCKET",
    "HELD_MAX_ROWS",
    "HeldJoin",
    "HeldTable",
    "JoinHow",
    "Strategy",
    "asof_join",
    "bucket_stats",
    "held_asof_join",
    "input_errors",
    "input_record_error",
    "versions_by_bucket",
]
