"""The versioned table in Delta Lake: a foundation every join stores its tables through.

The `versioned_table` operator (seeds 000/002) defines the semantics (`joins/operators/
versioned_table/`: spec and reference processor); the landing ingest, the stream-table join's
table side, the audit and the query commands all read and write versioned tables, so their Spark
form lives here, below the operators:

    spark_store    the Delta layout (columns, history retention, event-day partitions), snapshots
                   and as-of lookups
    ingest         one changelog micro-batch into the table, exactly once (`ingest_changelog`)
    stream_time    a batch's stream time per record, in arrival order (a two-pass prefix scan)
    prefix         the same scan over any ordered input (the stream-table join's grace decision,
                   a changelog side's history)
    quarantine     the rows a store refuses, with their reasons
    retention      the history retention a table was created with, and its check
    batches        which ingest batches a table holds (a re-run is recognised, never re-applied)
"""
