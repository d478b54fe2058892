"""Spec files that did not load, where a user looks: a red asset in the asset catalog.

A broken file cannot fail the code location (the other pipelines must still load), so each
one becomes an asset of its own in the `spec_errors` group, named as the pipeline or source
the file meant to define (or `spec_error_<file>` when that name is unusable or taken), whose
description holds the file, line and problem. Its check `spec_loads` says the same: the
`spec_errors` sensor (running by default) records the failed evaluation on every tick, so the
asset is red in the catalog and the lineage without anyone running anything; running the check
reads the file again and passes once it is fixed (reload the location to load it).
"""

# No `from __future__ import annotations`: Dagster reads the check's context annotation.
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetKey,
    AssetSpec,
    DefaultSensorStatus,
    Definitions,
    MetadataValue,
    SensorEvaluationContext,
    SensorResult,
    asset_check,
    sensor,
)

from joins.pipeline import SpecFileError

SPEC_ERRORS_GROUP = "spec_errors"
SPEC_CHECK = "spec_loads"
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def error_key(error: SpecFileError, taken: set[str]) -> AssetKey:
    if error.name and _KEY.match(error.name) and error.name not in taken:
        return AssetKey([error.name])
    stem = re.sub(r"[^a-z0-9_]", "_", Path(error.path).stem.lower())
    return AssetKey([f"spec_error_{stem}"])


def _kind(error: SpecFileError) -> str:
    return "sql" if error.path.endswith(".sql") else "yaml"


def _metadata(error: SpecFileError) -> dict[str, Any]:
    return {"file": MetadataValue.path(error.path),
            "line": MetadataValue.int(error.line or 0),
            "error": MetadataValue.text(error.message)}


def spec_error_definitions(errors: Sequence[SpecFileError], taken: set[str]) -> Definitions:
    """An asset, its check and one sensor for the spec files that did not load."""
    keyed: list[tuple[AssetKey, SpecFileError]] = []
    for error in errors:
        key = error_key(error, taken)
        taken.add(key.path[-1])
        keyed.append((key, error))
    specs = [AssetSpec(key, group_name=SPEC_ERRORS_GROUP, kinds={_kind(error)}, metadata=_metadata(error),
                       description=f"**The spec file `{error.path}` did not load**"
                                   f"{f' (line {error.line})' if error.line else ''}:\n\n"
                                   f"{error.message}\n\nFix the file and reload the code location.")
             for key, error in keyed]
    checks = [_check(key, error) for key, error in keyed]
    return Definitions(assets=specs, asset_checks=checks, sensors=[_sensor(keyed)])


def _check(key: AssetKey, error: SpecFileError) -> Any:
    @asset_check(asset=key, name=SPEC_CHECK, blocking=False,
                 description=f"The spec file {error.path} loads (read again when run).")
    def _loads(context: AssetCheckExecutionContext) -> AssetCheckResult:
        from joins.pipeline import load_spec_folder

        folder = Path(error.path).parent
        still = [e for e in load_spec_folder(folder).errors if e.path == error.path]
        if still:
            return AssetCheckResult(passed=False, severity=AssetCheckSeverity.ERROR,
                                    description=still[0].message, metadata=_metadata(still[0]))
        return AssetCheckResult(passed=True, description=f"{error.path} loads now: reload the "
                                                         f"code location to use it")

    return _loads


def _sensor(keyed: list[tuple[AssetKey, SpecFileError]]) -> Any:
    text = "\n".join(f"- {e}" for _, e in keyed)

    @sensor(name="spec_errors", minimum_interval_seconds=60,
            default_status=DefaultSensorStatus.RUNNING,
            description=f"Pipeline spec files that did not load (each is a red asset in the "
                        f"`{SPEC_ERRORS_GROUP}` group):\n{text}")
    def _errors(context: SensorEvaluationContext) -> SensorResult:
        return SensorResult(
            skip_reason=f"{len(keyed)} spec file(s) did not load: " + "; ".join(str(e) for _, e in keyed),
            asset_events=list(_evaluations(keyed)))

    return _errors


def _evaluations(keyed: list[tuple[AssetKey, SpecFileError]]) -> Iterator[AssetCheckEvaluation]:
    for key, error in keyed:
        yield AssetCheckEvaluation(asset_key=key, check_name=SPEC_CHECK, passed=False,
                                   severity=AssetCheckSeverity.ERROR, description=error.message,
                                   metadata=_metadata(error))
