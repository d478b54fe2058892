"""Every scenario in tests/scenarios/ passes on the reference engine, through the replay CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from joins.cli import EXIT_OK, main
from joins.scenario import load_scenario

SCENARIO_DIR = Path(__file__).parent / "scenarios"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.json"))


def test_scenarios_exist() -> None:
    assert SCENARIOS, f"no scenario files in {SCENARIO_DIR}"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_passes_replay_check(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", str(path), "--check"])
    err = capsys.readouterr().err
    assert code == EXIT_OK, err


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_file_is_well_formed(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.name == path.stem, "a scenario's name is its file name"
    assert scenario.notes, "a scenario says why its expectation is what it is"
    if scenario.expected_error is None:
        assert scenario.expected, "a scenario pins some output (or an expected error)"
