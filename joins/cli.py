"""`python -m joins replay FILE [--engine reference|spark] [--batch-size N] [--check]`,
`python -m joins check FOLDER` (the pipeline spec files, as the code location loads them),
`python -m joins table NAME get|history KEY ...` (a versioned table's answers, joins.query) and
`python -m joins reproduce JOIN --batch N | --day D [--as-of-commit N]` (a past output
recomputed from pinned inputs, joins.reproduce: exit 1 when it differs).

Exit codes: 0 ran (and, with --check, agreed; every spec file loads); 1 --check found a
difference; 2 the scenario, its config, an input record or a spec file is invalid (a clear
message, never a bare traceback).
"""

from __future__ import annotations

import argparse
import json
import os
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
    replay.add_argument("file", help="scenario JSON file (format: ../shared/scenarios/FORMAT.md; "
                                     "examples in tests/scenarios/)")
    replay.add_argument("--engine", choices=ENGINES, default="reference")
    replay.add_argument("--batch-size", type=_positive_int, default=None,
                        help="records per micro-batch, in arrival order (reference default: 1; "
                             "spark default: the whole input)")
    replay.add_argument("--check", action="store_true",
                        help="compare with the scenario's expected output; exit 1 on a difference")
    check = sub.add_parser("check", help="validate a folder of pipeline spec files (YAML, SQL)")
    check.add_argument("folder", nargs="?", default=None,
                       help="the specs folder (default: --specs, TJ_SPECS_DIR or pipelines/specs)")
    check.add_argument("--specs", default=None, help="the specs folder, as `table` and "
                       "`reproduce` take it")
    from joins.query.cli import add_parser
    from joins.reproduce.cli import add_parser as add_reproduce

    add_parser(sub)
    add_reproduce(sub)
    return parser


def check_specs(args: argparse.Namespace) -> int:
    """Every spec file of the folder as the code location would load it: one line per file."""
    from joins.pipeline.files import load_spec_folder, spec_files
    from joins.query.cli import specs_folder

    if args.folder and args.specs and args.folder != args.specs:
        print(f"error: two specs folders given ({args.folder} and --specs {args.specs}); give one",
              file=sys.stderr)
        return EXIT_INVALID
    folder = specs_folder(args.folder or args.specs)
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        print(f"error: the specs folder {folder} {what}", file=sys.stderr)
        return EXIT_INVALID
    files = spec_files(folder)
    if not files:
        print(f"error: no spec files (*.yaml, *.yml, *.sql) in {folder}", file=sys.stderr)
        return EXIT_INVALID
    loaded = load_spec_folder(folder)
    good = {path: f"pipeline {name!r}" for name, path in loaded.files.items()}
    good |= {use.source.file: f"source {name!r}, {use.storage.describe()} read by "
                              f"{', '.join(use.readers)}" for name, use in loaded.sources.items()}
    for path in map(str, files):
        if path in good:
            print(f"ok     {path}: {good[path]}")
    for error in loaded.errors:
        print(f"error  {error}", file=sys.stderr)
    print(f"{len(files)} spec file(s): {len(good)} ok, {len(loaded.errors)} with errors",
          file=sys.stderr)
    return EXIT_INVALID if loaded.errors else EXIT_OK


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
    if args.command == "check":
        return check_specs(args)
    if args.command == "table":
        from joins.query.cli import run

        try:
            run(args)
        except JoinsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_INVALID
        return EXIT_OK
    if args.command == "reproduce":
        from joins.reproduce.cli import run as reproduce

        try:
            return EXIT_OK if reproduce(args).agrees else EXIT_DIFF
        except JoinsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_INVALID
    parser.error(f"unknown command {args.command}")
    return EXIT_INVALID
