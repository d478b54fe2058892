"""Scenario (replay) files: see ../shared/scenarios/FORMAT.md and docs/semantics/README.md."""

from joins.scenario.compare import compare
from joins.scenario.model import Scenario, load_scenario
from joins.scenario.runner import run_scenario

__all__ = ["Scenario", "compare", "load_scenario", "run_scenario"]
