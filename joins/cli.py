"""`python -m joins replay FILE [--engine reference|spark] [--batch-size N] [--check]`.

Exit codes: 0 ran (and, with --check, agreed); 1 --check found a difference; 2 the scenario,
its config or an input record is invalid (a clear message, never a bare traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from joins.errors import JoinsError
from joins.scenario.compare import compare
from joins.scenario.model import load_scenario
from joins.scenario.runner import ENGINES, run_scenario

EXIT_OK, EXIT_DIFF, EXIT_INVALID = 0, 1, 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m joins",
                                     description="temporal-joins engine commands")
    sub = parser.add_subparsers(dest="command", required=True)
    replay = sub.add_parser("replay", help="run a scenario file and print what the engine emits")
    replay.add_argument("file", help="scenario JSON file (see README, 'Scenarios')")
    replay.add_argument("--engine", choices=ENGINES, default="reference")
    replay.add_argument("--batch-size", type=_positive_int, default=None,
                        help="records per micro-batch, in arrival order (reference default: 1; "
                             "spark default: the whole input)")
    replay.add_argument("--check", action="store_true",
                        help="compare with the scenario's expected output; exit 1 on a difference")
    return parser


def replay(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.file)
    except JoinsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    metrics: dict[str, int] = {}
    try:
        items = run_scenario(scenario, args.engine, args.batch_size, metrics)
    except JoinsError as exc:
        if scenario.expected_error is not None:
            if scenario.expected_error.lower() in str(exc).lower():
                print(f"error (expected): {exc}", file=sys.stderr)
                if args.check:
                    print(f"OK {scenario.name}: raised the expected error", file=sys.stderr)
                return EXIT_OK if args.check else EXIT_INVALID
            print(f"error: {exc}", file=sys.stderr)
            if args.check:
                print(f"FAIL {scenario.name}: expected an error containing "
                      f"{scenario.expected_error!r}", file=sys.stderr)
                return EXIT_DIFF
            return EXIT_INVALID
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    for item in items:
        print(json.dumps(item, sort_keys=False))
    # Records that produced no output are reported, never silently lost.
    counted = {k: v for k, v in sorted(metrics.items()) if v}
    if counted:
        print("metrics: " + ", ".join(f"{k}={v}" for k, v in counted.items()), file=sys.stderr)
    if not args.check:
        return EXIT_OK
    if scenario.expected_error is not None:
        print(f"FAIL {scenario.name}: expected an error containing {scenario.expected_error!r}, "
              f"but the scenario ran", file=sys.stderr)
        return EXIT_DIFF
    diff = compare(scenario.expected, items, scenario.expected_mode)
    if diff is None:
        print(f"OK {scenario.name}: {len(items)} item(s) agree ({scenario.expected_mode}, "
              f"engine {args.engine})", file=sys.stderr)
        return EXIT_OK
    print(f"FAIL {scenario.name} (engine {args.engine}):\n{diff}", file=sys.stderr)
    return EXIT_DIFF


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "replay":
        return replay(args)
    parser.error(f"unknown command {args.command}")
    return EXIT_INVALID
