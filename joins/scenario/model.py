"""The scenario file model: one JSON file pinning one operator's behaviour."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from joins.errors import JoinsError

ExpectedMode = Literal["ordered", "per_step", "last_per_step", "multiset", "final"]


class ScenarioFileError(JoinsError):
    """The scenario file itself is unreadable or not of the documented shape."""


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    operator: str
    config: dict[str, Any]
    input: list[Any]
    expected: list[dict[str, Any]] = []
    expected_mode: ExpectedMode = "ordered"
    expected_error: str | None = None
    notes: str | list[str] | None = None


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise ScenarioFileError(f"{p}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ScenarioFileError(f"{p}: not valid JSON: {exc}") from None
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        what = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        raise ScenarioFileError(f"{p}: field '{loc}': {what}") from None
