"""Argument types of the demo commands: a number out of range is one argparse line, before a
lake is wiped or a process started."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def whole(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            wanted = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{wanted}, got {value}")
        return value

    return parse


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"more than 0 seconds, got {text}")
    return value


def lake_root(parser: argparse.ArgumentParser, root: Path) -> Path:
    """`root` when it can be a lake root (missing, or a folder); else the parser's error."""
    if root.exists() and not root.is_dir():
        parser.error(f"the lake root {root} is a file, not a folder: pass --root with a folder")
    return root
