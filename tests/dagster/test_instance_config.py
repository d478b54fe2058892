"""The instance configuration the project writes (`runplatform/instance.py`): the run queue polls
every second, a home written by an earlier version is migrated, a user's own settings win."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from runplatform.instance import prepare_dagster_home


def load(home: Path) -> dict:
    return yaml.safe_load((home / "dagster.yaml").read_text())


def test_a_new_home_queues_runs_and_dequeues_every_second(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    home = prepare_dagster_home(tmp_path / "home")
    config = load(home)
    assert config["telemetry"] == {"enabled": False} and config["nux"] == {"enabled": False}
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()
    try:
        coordinator = instance.run_coordinator
        assert type(coordinator).__name__ == "QueuedRunCoordinator"
        assert coordinator.dequeue_interval_seconds == 1
        assert coordinator.get_run_queue_config().max_concurrent_runs == 2
        assert type(instance.run_launcher).__name__ == "WarmWorkerRunLauncher"
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
    finally:
        instance.dispose()


def test_a_home_an_earlier_version_wrote_is_migrated(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nrun_queue:\n"
                                       "  max_concurrent_runs: 2\n")
    config = load(prepare_dagster_home(home))
    assert "run_queue" not in config      # Dagster refuses run_queue beside run_coordinator
    assert config["run_coordinator"]["config"]["dequeue_interval_seconds"] == 1


def test_a_home_naming_the_launchers_old_module_gets_the_new_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("run_launcher:\n  module: pipelines.launcher\n"
                                       "  class: WarmWorkerRunLauncher\n")
    assert load(prepare_dagster_home(home))["run_launcher"] == {
        "module": "runplatform.launcher", "class": "WarmWorkerRunLauncher"}


def test_a_users_own_queue_settings_are_kept_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("run_queue:\n  max_concurrent_runs: 5\n")
    config = load(prepare_dagster_home(home))
    assert config["run_queue"] == {"max_concurrent_runs": 5}
    assert "run_coordinator" not in config


def test_a_users_own_run_retries_win(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("run_retries:\n  enabled: false\n")
    assert load(prepare_dagster_home(home))["run_retries"] == {"enabled": False, "max_retries": 2}
