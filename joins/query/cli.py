"""`python -m joins table NAME get KEY --as-of TIME` and `... history KEY [--from T] [--to T]`,
both with `--as-of-commit N` (what the table knew at Delta version N) and `--json`."""

from __future__ import annotations

import argparse
import json
import os
import sys

from joins.core.human import iso_time


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    table = sub.add_parser("table", help="ask a versioned table: a key's value at a time, its history")
    table.add_argument("name", help="the versioned table (a source of a pipeline spec, e.g. rates)")
    table.add_argument("question", choices=["get", "history"])
    table.add_argument("key", help="the key; several key columns: values separated by commas")
    table.add_argument("--as-of", dest="as_of", help="get: the event time (ISO 8601 or epoch ms)")
    table.add_argument("--from", dest="start", help="history: versions valid at or after this time")
    table.add_argument("--to", dest="end", help="history: versions valid at or before this time")
    table.add_argument("--as-of-commit", dest="commit", type=int, default=None,
                       help="what the table held at this Delta version (time travel)")
    table.add_argument("--json", action="store_true", help="the answer as JSON")
    lake_arguments(table)


def lake_arguments(parser: argparse.ArgumentParser) -> None:
    """`--lake` and `--specs`: which lake, and the pipeline specs that name its tables."""
    parser.add_argument("--lake", default=None, help="lake root (default: TJ_LAKE_ROOT or ./var/lake)")
    parser.add_argument("--specs", default=None,
                        help="pipeline specs folder (default: TJ_SPECS_DIR or pipelines/specs)")


def specs_folder(given: str | None) -> str:
    """The specs folder a command reads: the one given, else TJ_SPECS_DIR, else the code
    location's own."""
    return given or os.environ.get("TJ_SPECS_DIR") or "pipelines/specs"


def lake_of(args: argparse.Namespace) -> tuple[str, str]:
    """(specs folder, absolute lake root) from `lake_arguments` and the environment."""
    return specs_folder(args.specs), os.path.abspath(args.lake or os.environ.get("TJ_LAKE_ROOT")
                                                      or "./var/lake")


def run(args: argparse.Namespace) -> None:
    """Answer the question on stdout; QueryError (JoinsError) for a question it cannot answer."""
    from joins.query import get, history, parse_key, parse_time, versioned_table
    from joins.query.versioned import QueryError, require_stored

    specs, root = lake_of(args)
    table = versioned_table(args.name, specs=specs, root=root)
    key = parse_key(args.key, table.key_types)
    if args.question == "get" and args.as_of is None:
        raise QueryError("get needs --as-of TIME (ISO 8601 such as 2024-03-02T14:05:00Z, or epoch ms)")
    # Every argument is checked before the session starts (seconds): a typo fails at once.
    as_of = None if args.as_of is None else parse_time(args.as_of)
    start = None if args.start is None else parse_time(args.start)
    end = None if args.end is None else parse_time(args.end)
    if args.question == "get" and (start is not None or end is not None):
        raise QueryError("--from and --to go with history; get takes --as-of")
    if args.question == "history" and as_of is not None:
        raise QueryError("--as-of goes with get; history takes --from and --to")
    if start is not None and end is not None and start > end:
        raise QueryError(f"--from ({iso_time(start)}) is after --to ({iso_time(end)}): no version "
                         "is valid in such an interval")
    if args.commit is not None and args.commit < 0:
        raise QueryError(f"--as-of-commit: Delta versions count from 0, got {args.commit}")
    require_stored(table, args.commit)
    from joins.spark import get_spark

    spark = get_spark()
    if args.question == "get":
        assert as_of is not None
        answer = get(spark, table, key, as_of, commit=args.commit)
        print(json.dumps(answer.to_json(), indent=2) if args.json else answer.text())
        return
    versions = history(spark, table, key, start=start, end=end, commit=args.commit)
    if args.json:
        print(json.dumps([v.to_json() for v in versions], indent=2))
        return
    where = f"{table.name} {args.key}" + (f" at commit {args.commit}" if args.commit is not None else "")
    if not versions:
        print(f"{where}: no version" + (" in that interval" if start or end else
                                         " (the table never held this key)"))
        return
    print(f"{where}: {len(versions)} version(s), oldest first")
    for v in versions:
        until = "now" if v.valid_to is None else iso_time(v.valid_to)
        value = "deleted" if v.value is None else ", ".join(f"{k}={x}" for k, x in v.value.items())
        note = "  (beyond history retention: no read reaches it)" if v.beyond_retention else ""
        print(f"  {iso_time(v.valid_from)} .. {until}: {value}{note}")
    sys.stdout.flush()
