"""`./tj`'s usage: `help` (and `-h`, `--help`, nothing) lists the commands on stdout; an unknown
command says which on stderr, with the list, and exits 2 (no setup runs for either)."""

from __future__ import annotations

import subprocess
from pathlib import Path

TJ = Path(__file__).resolve().parents[1] / "tj"


def _tj(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TJ), *args], capture_output=True, text=True, timeout=30, check=False)


def test_help_lists_the_commands() -> None:
    for args in ((), ("help",), ("-h",), ("--help",)):
        run = _tj(*args)
        assert run.returncode == 0, (args, run.stderr)
        assert "./tj demo" in run.stdout and "./tj test" in run.stdout, args
        assert run.stderr == "", args


def test_an_unknown_command_is_named_and_refused() -> None:
    run = _tj("tset")
    assert run.returncode == 2
    assert run.stderr.startswith("./tj: unknown command 'tset'\n")
    assert "./tj test" in run.stderr and run.stdout == ""
