"""Landing files -> the Delta tables of a source (issue 9): one ingest run of a source at a
time, exactly once across crashes, no file able to block the source.

    IngestSource       what a run needs: landing folder and schema, table paths, lease
    run_ingest         one run: resume a half-done batch, plan and ingest the new files
    list_landing       the landed file names of a folder (what a sensor looks at)
    ingest_in_progress the lease holder of a source's running ingest, if any
"""

from joins.ingest.run import ingest_in_progress, list_landing, run_ingest
from joins.ingest.source import IngestSource, IngestSummary, SourceKind
from joins.ingest.stream import SEQ

__all__ = [
    "SEQ",
    "IngestSource",
    "IngestSummary",
    "SourceKind",
    "ingest_in_progress",
    "list_landing",
    "run_ingest",
]
