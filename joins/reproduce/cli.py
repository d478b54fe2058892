"""`python -m joins reproduce JOIN --batch N` and `... --day D [--as-of-commit N]`: recompute a
past output of a pipeline's join from its inputs pinned to the versions that run read, and say
whether the output held exactly those rows (exit 0) or not (exit 1, with examples)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import TYPE_CHECKING

from joins.query.cli import lake_arguments, lake_of
from joins.reproduce.lineage import ReproduceError
from joins.spec import did_you_mean

if TYPE_CHECKING:
    from joins.reproduce.diff import Reproduction
    from joins.reproduce.engine import Runtime


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    cmd = sub.add_parser("reproduce", help="recompute a past batch or day of a join from its "
                                           "pinned inputs and diff it with the output")
    cmd.add_argument("join", help="the pipeline (its spec's name, e.g. orders_with_rates)")
    what = cmd.add_mutually_exclusive_group(required=True)
    what.add_argument("--batch", type=int, help="the micro-batch id (its plan pins its inputs)")
    what.add_argument("--day", help="an event day (YYYY-MM-DD), as the output held it at a commit")
    cmd.add_argument("--as-of-commit", dest="commit", type=int, default=None,
                     help="--day: the output's Delta version (default: the latest)")
    cmd.add_argument("--json", action="store_true", help="the result as JSON")
    lake_arguments(cmd)


def join_runtime(name: str, *, specs: str, root: str) -> Runtime:
    """The join of pipeline `name` in the specs folder, over the lake at `root`."""
    from joins.pipeline.files import load_spec_folder
    from joins.pipeline.spec import PipelineLayout

    loaded = load_spec_folder(specs)
    by_name = {spec.name: spec for spec in loaded.specs}
    spec = by_name.get(name)
    if spec is None:
        hint = f" ({len(loaded.errors)} spec file(s) did not load: ./tj check {specs})" \
            if loaded.errors else ""
        raise ReproduceError(f"no pipeline {name!r} in {specs}{did_you_mean(name, list(by_name))}; "
                             f"pipelines: {', '.join(sorted(by_name)) or 'none'}{hint}")
    engine = spec.engine(PipelineLayout(root, spec))
    runtime = getattr(engine, "runtime", None)
    if runtime is None:
        raise ReproduceError(f"{name}: reproducing is not available for the {spec.operator} "
                             f"operator")
    made: Runtime = runtime()
    return made


def parse_day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ReproduceError(f"--day: not a date (YYYY-MM-DD): {text!r}") from None


def run(args: argparse.Namespace) -> Reproduction:
    """Reproduce and print; ReproduceError (a JoinsError) for a question it cannot answer."""
    from joins.reproduce.engine import completed_plan, reproduce_batch, reproduce_day
    from joins.spark import get_spark

    if args.batch is not None and args.commit is not None:
        raise ReproduceError("--as-of-commit goes with --day (a batch's plan pins its own versions)")
    for flag, value in (("--batch", args.batch), ("--as-of-commit", args.commit)):
        if value is not None and value < 0:
            raise ReproduceError(f"{flag}: batch ids and commits count from 0, got {value}")
    day = None if args.day is None else parse_day(args.day)
    specs, root = lake_of(args)
    runtime = join_runtime(args.join, specs=specs, root=root)
    if args.batch is not None:
        completed_plan(runtime, args.batch)   # a batch that never ran fails before the session starts
    spark = get_spark()
    result = reproduce_batch(spark, runtime, args.batch) if day is None \
        else reproduce_day(spark, runtime, day, args.commit)
    print(json.dumps(result.to_json(), indent=2, default=str) if args.json else result.text(),
          flush=True)
    return result
