"""The Dagster APIs in beta or preview that the asset factory uses on purpose, and the notes Dagster
prints for each use of them, silenced here.

Every code location load and every demo or command run built the Definitions and printed some
thirty of those notes (`./tj dev`'s console opened with them): about this project's code, which a
user cannot act on. Only the notes about these APIs are silenced, by their text; Dagster's notes
about anything else, a user's own code included, still show.
"""

from __future__ import annotations

import re
import warnings

USED = ("CodeReferencesMetadataValue", "LocalFileCodeReference", "multi_observable_source_asset",
        "backfill_policy", "partitions_def on an AssetCheckSpec")


def silence_notes_of_used_apis() -> None:
    for name in USED:
        warnings.filterwarnings(
            "ignore", message=rf"^(Class |Function |Parameter |Specifying a )?`?{re.escape(name)}`?\b"
            r".*(currently in beta|currently in preview)")
