"""Dagster's notes about the beta and preview APIs the asset factory uses on purpose
(assets/beta_apis.py) are not printed when the Definitions load; its notes about anything else are."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

from assets.beta_apis import USED, silence_notes_of_used_apis

REPO = Path(__file__).resolve().parents[2]


def test_loading_the_code_location_prints_no_note_about_the_apis_it_uses() -> None:
    # A new interpreter with every warning shown, as `./tj dev`'s code server loads workspace.yaml.
    # The code server also copies every sensor (`with_attributes`), which raised a beta note
    # about `owners` that none of them names.
    load = ("from pipelines.definitions import defs\n"
            "assert [s.with_attributes() for s in defs.sensors]")
    run = subprocess.run([sys.executable, "-W", "default", "-c", load],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not [name for name in USED if name in run.stderr], run.stderr[:3000]
    assert "BetaWarning" not in run.stderr and "PreviewWarning" not in run.stderr, run.stderr[:3000]


def test_a_note_about_another_api_still_shows() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        silence_notes_of_used_apis()
        warnings.warn("Function `multi_observable_source_asset` is currently in beta, and may change",
                      UserWarning, stacklevel=1)
        warnings.warn("Class `SomethingElse` is currently in beta, and may change", UserWarning,
                      stacklevel=1)
    assert [str(w.message).split("`")[1] for w in seen] == ["SomethingElse"]
