"""`./tj demo`'s and `./tj demo --live`'s arguments: a mistake is one line before anything
starts (no lake, no Spark)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from demo.run import main


@pytest.mark.parametrize(("argv", "said"), [
    (["--waves", "0"], "argument --waves: between 1 and 100, got 0"),
    (["--waves", "-3"], "argument --waves: between 1 and 100, got -3"),
    (["--waves", "four"], "argument --waves: not a whole number: 'four'"),
    (["--live", "--interval", "0"], "argument --interval: more than 0 seconds, got 0"),
    (["--live", "--interval", "soon"], "argument --interval: not a number of seconds: 'soon'"),
    (["--live", "--port", "70000"], "argument --port: between 1 and 65535, got 70000"),
    (["--live", "--waves", "-1"], "argument --waves: at least 0, got -1"),
    (["--live", "--backfill-every", "0"], "argument --backfill-every: at least 1, got 0"),
])
def test_a_wave_count_it_cannot_land_is_refused(argv: list[str], said: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2 and said in capsys.readouterr().err


def test_a_file_as_the_lake_root_is_refused(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "lake").write_text("not a folder")
    for live in ([], ["--live"]):
        with pytest.raises(SystemExit) as stopped:
            main([*live, "--root", str(tmp_path / "lake")])
        assert stopped.value.code == 2
        assert f"the lake root {tmp_path / 'lake'} is a file, not a folder" in capsys.readouterr().err


def test_the_command_says_only_its_error(tmp_path: Path) -> None:
    # As a user runs it: the root is checked after the pipelines' Definitions are built, which
    # is when Dagster prints its beta notes; the demo's output must not start with them.
    (tmp_path / "lake").write_text("not a folder")
    run = subprocess.run([sys.executable, "-m", "demo", "--root", str(tmp_path / "lake")],
                         capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("usage: python -m demo"), run.stderr
    assert "is a file, not a folder" in lines[1]
