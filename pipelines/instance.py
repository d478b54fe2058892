"""The Dagster instance configuration the project writes (`DAGSTER_HOME/dagster.yaml`).

`./tj dev`, `./tj demo` and the live demo use it; keys a user already set are kept:

- `telemetry.enabled: false`: nothing is sent anywhere (and no banner on every start);
- `nux.enabled: false`: no "join the Dagster community" pop-up over the first page visited;
- `run_queue.max_concurrent_runs: 2`: every run starts a Spark driver (a JVM); on a small machine
  more at once only slows each down.
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
    "run_queue": {"max_concurrent_runs": 2},
}


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
    merged: dict[str, Any] = {**DEFAULTS, **overrides}
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
