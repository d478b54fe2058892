"""The Dagster APIs in beta or preview that the asset factory uses on purpose, and the notes Dagster
prints for each use of them, silenced here.

Every code location load and every demo or command run built the Definitions and printed some
thirty of those notes (`./tj dev`'s console opened with them): about this project's code, which a
user cannot act on. Only the notes about these APIs are silenced, by their text; Dagster's notes
about anything else, a user's own code included, still show, but for one Dagster raises about
its own copies of sensors (`SENSOR_COPY_NOTE`).
"""

from __future__ import annotations

import re
import warnings

USED = ("CodeReferencesMetadataValue", "LocalFileCodeReference", "multi_observable_source_asset",
        "backfill_policy", "partitions_def on an AssetCheckSpec")


# A note Dagster raises about itself: copying a sensor (`SensorDefinition.with_attributes`, as
# `./tj dev`'s code server does at load) passes the sensor's `owners`, which its constructor
# stored as [] for none, and the beta check takes [] for owners given. The project's sensors name
# none. The note reads the same for a sensor that does name owners, so a user's own sensor with
# owners goes without it too: the one exception to "anything else still shows".
SENSOR_COPY_NOTE = r"^Parameter `owners` of initializer `SensorDefinition\.__init__` is currently in beta"


def silence_notes_of_used_apis() -> None:
    for name in USED:
        warnings.filterwarnings(
            "ignore", message=rf"^(Class |Function |Parameter |Specifying a )?`?{re.escape(name)}`?\b"
            r".*(currently in beta|currently in preview)")
    warnings.filterwarnings("ignore", message=SENSOR_COPY_NOTE)
