"""`python -m joins replay ...` as the tests run it.

In this process (`replay`): the command's own entry point (`joins.cli.main`, what `python -m
joins` calls) with its stdout, stderr and exit code captured; its Spark engine gets the test
process's session, warm, instead of starting a JVM of its own (a child's JVM start and cold JIT
cost tens of seconds a call). One test per command runs it as a user does, in a child process
(`replay_in_a_child`): that the module runs as a program, finds its package and starts Spark.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from joins.cli import main

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "tests" / "scenarios"


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def arguments(path: Path, engine: str, batch_size: int | None, check: bool) -> list[str]:
    args = ["replay", str(path), "--engine", engine]
    if batch_size is not None:
        args += ["--batch-size", str(batch_size)]
    if check:
        args.append("--check")
    return args


def replay(path: Path, engine: str, batch_size: int | None = None, *, check: bool = False) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(arguments(path, engine, batch_size, check))
    return Ran(code, out.getvalue(), err.getvalue())


def replay_in_a_child(path: Path, engine: str, batch_size: int | None = None, *,
                      check: bool = False, timeout_s: float = 900) -> Ran:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                      os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "joins", *arguments(path, engine, batch_size, check)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
    return Ran(done.returncode, done.stdout, done.stderr)
