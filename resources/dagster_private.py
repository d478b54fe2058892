"""Every private Dagster API the project uses, in one list, each with why no public one serves.

Dagster's `dagster._*` modules change without notice between releases. The project pins one
Dagster version (`PINNED`, the same as pyproject.toml; `tests/test_layers.py` checks both and
that no other module imports `dagster._`). On an upgrade, this list is what to re-check: each
name below is resolved on first use (some of their modules cost half a second to import, which
a code location or a sensor should not pay for names it never uses).
"""

from __future__ import annotations

import importlib
from typing import Any

PINNED = "1.13.27"

# name -> (module, why there is no public API for it)
PRIVATE: dict[str, tuple[str, str]] = {
    # Asset checks (pipelines/checks.py): the agreement check names the materialization it
    # judged, and the staleness sensor reads the verdicts per partition.
    "AssetCheckEvaluationTargetMaterializationData": (
        "dagster._core.definitions.asset_checks.asset_check_evaluation",
        "an asset check's result names the materialization it judged only through this class"),
    "AssetCheckExecutionRecordStatus": (
        "dagster._core.storage.asset_check_execution_record",
        "the status values of get_asset_check_partition_info's records"),
    # Type of what define_asset_job returns (sensors, schedules): annotations only.
    "UnresolvedAssetJobDefinition": (
        "dagster._core.definitions.unresolved_asset_job_definition",
        "define_asset_job's return type is not exported"),
    # The warm run worker (runplatform/launcher.py, runplatform/run_worker.py): a run launcher that
    # hands runs to a warm process executes them the way Dagster's own run worker does.
    "LaunchRunContext": ("dagster._core.launcher", "the argument of RunLauncher.launch_run"),
    "DefaultRunLauncher": ("dagster._core.launcher.default_run_launcher",
                           "the launcher the warm one falls back to"),
    "EngineEventData": ("dagster._core.events", "engine events a run worker reports"),
    "core_execute_run": ("dagster._grpc.impl", "what `dagster api execute_run` does for one run"),
    "recon_job_from_origin": ("dagster._utils.hosted_user_process",
                              "a run's job from the origin its record carries"),
    # The demo's recorder (demo/recording.py): sensor and schedule ticks recorded into an
    # instance as the daemon would, so the UI shows them without a daemon process.
    "InMemoryJob": ("dagster._core.definitions.job_base", "execute_run's job argument"),
    "InstigatorType": ("dagster._core.definitions.run_request", "tick records' instigator kind"),
    "create_execution_plan": ("dagster._core.execution.api", "a recorded run's plan"),
    "execute_run": ("dagster._core.execution.api", "runs a created run record in process"),
    "RemoteInstigatorOrigin": ("dagster._core.remote_origin", "a tick record's origin"),
    "RemoteRepositoryOrigin": ("dagster._core.remote_origin", "a tick record's origin"),
    "InstigatorState": ("dagster._core.scheduler.instigation", "a sensor's stored state"),
    "InstigatorStatus": ("dagster._core.scheduler.instigation", "a sensor's stored state"),
    "ScheduleInstigatorData": ("dagster._core.scheduler.instigation", "a schedule's state"),
    "SensorInstigatorData": ("dagster._core.scheduler.instigation", "a sensor's state, cursor"),
    "TickData": ("dagster._core.scheduler.instigation", "a recorded tick"),
    "TickStatus": ("dagster._core.scheduler.instigation", "a recorded tick's outcome"),
    "REPOSITORY_LABEL_TAG": ("dagster._core.storage.tags", "run tags the UI links by"),
    "RUN_KEY_TAG": ("dagster._core.storage.tags", "run tags the UI links by"),
    "SCHEDULE_NAME_TAG": ("dagster._core.storage.tags", "run tags the UI links by"),
    "SENSOR_NAME_TAG": ("dagster._core.storage.tags", "run tags the UI links by"),
    "WILL_RETRY_TAG": ("dagster._core.storage.tags",
                       "the daemon's mark on a failed run it will re-execute (run_retries)"),
    "location_origins_from_yaml_paths": ("dagster._core.workspace.load",
                                         "the code location a workspace.yaml names"),
    # Tests only.
    "create_run_for_test": ("dagster._core.test_utils", "a run record in a given state"),
    "InstigatorSelector": ("dagster._core.definitions.selector", "a sensor's ticks by name"),
    "PartitionLoadingContext": ("dagster._core.definitions.partitions.context",
                                "partition keys as of a given time"),
    "TemporalContext": ("dagster._core.definitions.temporal_context",
                        "partition keys as of a given time"),
    "WorkspaceProcessContext": ("dagster._core.workspace.context",
                                "the webserver's view of a workspace, in process"),
    "WorkspaceFileTarget": ("dagster._core.workspace.load_target", "a workspace.yaml target"),
    "ModuleCodePointer": ("dagster._core.code_pointer", "a run record's job origin"),
    "JobPythonOrigin": ("dagster._core.origin", "a run record's job origin"),
    "RepositoryPythonOrigin": ("dagster._core.origin", "a run record's job origin"),
    "current_defs_state_storage": ("dagster._core.storage.defs_state.base",
                                   "a context variable a leaked sensor context leaves set"),
}
# The name a module gives something, where ours differs.
_RENAMED = {"current_defs_state_storage": "_current_storage"}


def __getattr__(name: str) -> Any:
    if name not in PRIVATE:
        raise AttributeError(f"{name} is not in resources.dagster_private.PRIVATE: add it there, "
                             f"with why no public Dagster API serves")
    value = getattr(importlib.import_module(PRIVATE[name][0]), _RENAMED.get(name, name))
    globals()[name] = value
    return value
