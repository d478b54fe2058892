"""The Dagster instance configuration the project writes (`DAGSTER_HOME/dagster.yaml`).

`./tj dev`, `./tj demo` and the live demo use it; keys a user already set are kept:

- `telemetry.enabled: false`: nothing is sent anywhere (and no banner on every start);
- `nux.enabled: false`: no "join the Dagster community" pop-up over the first page visited;
- the run queue (`run_coordinator: QueuedRunCoordinator`) with `max_concurrent_runs: 2`: on a
  small machine more Spark runs at once only slow each down; and `dequeue_interval_seconds: 1`:
  Dagster's daemon looks for queued runs every 5 s by default, which a user who launched a run
  waits for. (The shorter `run_queue` key cannot set the interval, and Dagster refuses it beside
  `run_coordinator`: a home this project wrote with `run_queue: {max_concurrent_runs: 2}` is
  migrated; a `run_queue` a user wrote otherwise is kept, and then no run_coordinator is added.)
- the run launcher `runplatform.launcher.WarmWorkerRunLauncher`: a run executes in the warm run
  worker `./tj dev` starts (`runplatform.run_worker`), or in a process of its own (Dagster's
  default) when no worker is up or it is busy.
- `run_retries` enabled with `max_retries: 2`: Dagster's daemon re-executes a failed run (a lost
  run worker, a lease that stayed busy, a machine out of memory) up to twice. Every run is safe
  to repeat (an ingest takes its files once, a micro-batch exactly once, a backfill replaces its
  days), and without a retry a failed run's work waits: the sensors request a run for what is
  new, and the files or versions of the failed one are not new any more. A run that keeps
  failing stops after the second retry; the sensors' skip reasons then name it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULTS: dict[str, Any] = {
    "telemetry": {"enabled": False},
    "nux": {"enabled": False},
    "run_coordinator": {"module": "dagster.core.run_coordinator",
                        "class": "QueuedRunCoordinator",
                        "config": {"max_concurrent_runs": 2, "dequeue_interval_seconds": 1}},
    "run_launcher": {"module": "runplatform.launcher", "class": "WarmWorkerRunLauncher"},
    "run_retries": {"enabled": True, "max_retries": 2},
}
# What earlier versions wrote; replaced by the run_coordinator block above.
OLD_RUN_QUEUE = {"max_concurrent_runs": 2}
# Where the launcher lived before the run platform had a package of its own: a home written
# then names it, and would fail to load the instance.
MOVED_MODULES = {"pipelines.launcher": "runplatform.launcher"}


def dagster_home() -> Path:
    """DAGSTER_HOME (set to `<repo>/.dagster_home` when unset, as `./tj dev` does)."""
    return Path(os.environ.setdefault("DAGSTER_HOME", str(REPO / ".dagster_home")))


def prepare_dagster_home(home: Path | None = None, **overrides: Any) -> Path:
    """Create the home and its dagster.yaml with the project's defaults (and `overrides`, keys of
    the instance config); settings already in the file win over the defaults."""
    home = home or dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    current = yaml.safe_load(config.read_text()) if config.exists() else None
    if current and current.get("run_queue") == OLD_RUN_QUEUE and "run_coordinator" not in current:
        current = {k: v for k, v in current.items() if k != "run_queue"}
    launcher = (current or {}).get("run_launcher")
    if isinstance(launcher, dict) and launcher.get("module") in MOVED_MODULES:
        current = {**current, "run_launcher": {**launcher,
                                               "module": MOVED_MODULES[launcher["module"]]}}
    merged: dict[str, Any] = {**DEFAULTS, **overrides}
    if current and ("run_queue" in current or "run_coordinator" in current):
        merged.pop("run_coordinator", None)   # the user's own queue settings win, whole
    for key, value in (current or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    if merged != current:
        config.write_text(yaml.safe_dump(merged, sort_keys=False))
    return home


if __name__ == "__main__":
    print(prepare_dagster_home())
