"""The demo (`./tj demo`, i.e. `python -m demo`): orders enriched with currency rates,
orders matched with their deliveries (`demo_deliveries.py`), then customers joined with their
accounts and counted per country (`demo_accounts.py`), and orders enriched with their customer
by a foreign-key join (`demo_order_customer.py`).

It lands two out-of-order sources wave by wave (with late records), and drives everything
through the Dagster definitions the UI shows, in this process: sensor ticks decide what to run
(landing sensors -> ingest runs, the micro-batch sensor -> join micro-batches), the nightly
schedule decides the backfill, and the checks job checks the result. Runs are recorded in the
Dagster instance under DAGSTER_HOME (default `.dagster_home`, as `./tj dev` uses), so
`./tj dev` shows the whole history afterwards.

Prints: per-batch rows in/out/late, the versioned table's versions of a key, an as-of lookup,
the quarantine counts, the asset checks before and after the backfill, and the backfill's
agreement report (per event day: what the micro-batches wrote vs what the backfill computed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo.arguments import lake_root, whole
from demo.demo_deliveries import DeliveriesResult, ingest_and_join, summary
from demo.demo_deliveries import land as land_deliveries
from demo.demo_runner import Demo, checks_and_nightly_backfill, microbatches
from demo.demo_runner import fresh_root as _fresh_root
from demo.sample_data import SampleConfig


def _batch_line(md: Mapping[str, Any]) -> str:
    return (f"batch {md['batch_id']}: {md['batch_rows_in_stream']} orders + "
            f"{md['batch_rows_in_table']} rates in, {md['batch_rows_out']} rows out, "
            f"{md['batch_late_joined']} late joined, {md['batch_still_buffered']} still buffered; "
            f"event days {md['event_days_touched']}; output Delta v{md['delta_version']}")


def _fmt_ts(ms: int | None) -> str:
    if ms is None:
        return "-"
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).strftime("%m-%d %H:%M")


@dataclass
class DemoResult:
    """What the demo did, for tests: per-batch metadata, checks before and after the backfill
    (of orders_with_rates; `deliveries` holds the same for orders_with_deliveries)."""

    batches: list[dict[str, Any]] = field(default_factory=list)
    checks_before: dict[str, bool] = field(default_factory=dict)
    checks_after: dict[str, bool] = field(default_factory=dict)
    backfill: dict[str, Any] = field(default_factory=dict)
    deliveries: DeliveriesResult = field(default_factory=DeliveriesResult)
    accounts: Any = None   # demo.demo_accounts.AccountsResult


def run(root: Path, *, sample: SampleConfig | None = None, instance: Any | None = None,
        echo: bool = True) -> DemoResult:
    """Land the sample data wave by wave, ingest and micro-batch it through the sensors, run the
    nightly backfill, check. `instance`: the Dagster instance (default: DAGSTER_HOME's)."""
    from demo.sample_data import generate, write_wave
    from demo.sample_deliveries import generate_deliveries
    from joins import audit
    from joins.pipeline import PipelineLayout, parse_pipeline_spec
    from pipelines.definitions import DELIVERIES_SPEC, DEMO_SPEC

    _fresh_root(root)
    demo = Demo(root, instance, echo=echo)
    demo.forget_lake()
    out = DemoResult()
    spec = parse_pipeline_spec(DEMO_SPEC)
    layout = PipelineLayout(str(root.resolve()), spec)
    rates = spec.input("table")
    cfg = sample or SampleConfig()
    data = generate(cfg)
    n_orders = sum(len(w.orders) for w in data)
    n_rates = sum(len(w.rates) for w in data)
    demo.say(f"generated {len(data)} waves: {n_orders} orders (JSON lines) and "
             f"{n_rates} rate updates (CSV), out of order, some late, one expired, one bad row")
    dspec = parse_pipeline_spec(DELIVERIES_SPEC)
    deliveries = generate_deliveries(cfg, data)
    demo.say(f"and {deliveries.count} deliveries of those orders (JSON lines), some after the "
             f"three hours of {dspec.name}, some landing a wave late")

    demo.say("starting Spark (the first use of a session costs some seconds)")
    demo.defs.resources["spark"].get_session()
    demo.say("Spark is up")
    for wave in data:
        files = write_wave(wave, orders_dir=Path(layout.landing(spec.stream)),
                           rates_dir=Path(layout.landing(spec.table)))
        demo.say(f"wave {wave.index}: landed {files.orders.name} ({len(wave.orders)} orders), "
                 f"{files.rates.name} ({len(wave.rates)} rates)")
        for source in (spec.table, spec.stream):
            for ev in demo.sensor_runs(f"{source.name}_landing_sensor"):
                for _, md in ev.materializations:
                    demo.say(f"  ingest {source.name} batch {md['batch_id']}: {md['rows_in']} rows in = "
                             f"{md['stored']} stored + {md['expired']} expired + {md['quarantined']} "
                             f"quarantined (Delta v{md['delta_version']})")
        for md in microbatches(demo, spec):
            out.batches.append(md)
            demo.say(f"  micro-{_batch_line(md)}")
        land_deliveries(wave.index, deliveries.waves[wave.index],
                        Path(layout.landing(dspec.right)), demo)
        ingest_and_join(demo, dspec, out.deliveries)
    _, skip, _ = demo.tick(f"{spec.name}_microbatch_sensor")
    demo.say(f"micro-batch sensor ticks again: skipped: {skip}")
    # The joins' partitions now reach the day of their stream time (the UI reloads its location).
    demo.reload()

    demo.say("per-batch rows in / out / late:")
    demo.table(f"    {'batch':>5} {'orders in':>9} {'rates in':>8} {'rows out':>8} {'late':>5} "
               f"{'buffered':>8}  event days")
    for md in out.batches:
        demo.table(f"    {md['batch_id']:>5} {md['batch_rows_in_stream']:>9} "
                   f"{md['batch_rows_in_table']:>8} {md['batch_rows_out']:>8} "
                   f"{md['batch_late_joined']:>5} {md['batch_still_buffered']:>8}  "
                   f"{md['event_days_touched']}")

    session = demo.defs.resources["spark"].get_session()
    key = "EUR"
    versions = audit.versions_of_key(session, rates, layout.input_table("table"), key)
    table_time = audit.table_stream_time(session, layout.input_table("table")) or cfg.start_ms
    horizon = table_time - spec.history_retention_ms
    demo.say(f"versioned table `{spec.table.name}`: {len(versions)} versions of {key}; stream time "
             f"{_fmt_ts(table_time)}, history kept from {_fmt_ts(horizon)} (the last 5 versions):")
    for v in versions[-5:]:
        demo.table(f"    ts {_fmt_ts(v['ts'])}  rate {v['rate']:<9} valid to {_fmt_ts(v['valid_to'])}")
    probes = [(key, table_time - 2 * 3_600_000 - 17 * 60_000), (key, table_time - 20 * 3_600_000),
              (key, cfg.start_ms + 5 * 3_600_000)]
    demo.say("as-of lookups get(key, as_of) on the versioned table:")
    for row in audit.lookup_as_of(session, rates, layout.input_table("table"), probes):
        rate = row.get(spec.table.value_names[0])
        why = ("older than stream time - history retention" if row["as_of"] < horizon
               else "no version valid then")
        demo.table(f"    get({row[spec.table.key_column]}, {_fmt_ts(row['as_of'])}) -> "
                   f"{f'null ({why})' if rate is None else f'rate {rate}'}")
    q = audit.quarantine_counts(session, layout)
    demo.say(f"quarantine: {q.quarantined} of {q.rows_in} input rows ("
             + ", ".join(f"{where} {kind}: {n}" for (where, kind), n in sorted(q.by_kind.items())) + ")")

    out.checks_before, out.backfill, out.checks_after = checks_and_nightly_backfill(demo, spec)
    summary(demo, dspec, out.deliveries)
    from demo.demo_accounts import run_accounts

    out.accounts = run_accounts(demo, root, cfg)
    return out


# Each wave is a micro-batch of every pipeline, seconds each: a hundred is a long demo.
MAX_WAVES = 100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo",
                                     description="orders enriched with currency rates, end to end")
    parser.add_argument("--root", default=None,
                        help="demo lake root (default: TJ_LAKE_ROOT or ./var/lake); wiped first")
    parser.add_argument("--waves", type=whole(1, MAX_WAVES), default=SampleConfig.waves,
                        help=f"landing waves, one micro-batch each (1 to {MAX_WAVES})")
    parser.add_argument("--live", action="store_true",
                        help="instead: the Dagster UI with sensors on and data landing "
                             "(./tj demo --live --help for its options)")
    argv = sys.argv[1:] if argv is None else argv
    if "--live" in argv:
        # The live demo's own options (and --help) are its parser's.
        from demo.live_demo import main as live

        return live([a for a in argv if a != "--live"])
    args = parser.parse_args(argv)
    # Library warnings (beta APIs, Spark) are not the demo's output. Before the import below:
    # pipelines.definitions builds the Definitions, and Dagster's beta notes with them, as it loads.
    warnings.filterwarnings("ignore")
    from pipelines.definitions import lake_root_from_env

    root = lake_root(parser, Path(args.root or lake_root_from_env()).resolve())
    # The demo's data is tiny: few shuffle partitions mean few tasks per Spark job.
    os.environ.setdefault("TJ_SHUFFLE_PARTITIONS", "2")
    from runplatform.instance import prepare_dagster_home

    # Runs re-executed from the UI and the code location read the lake from the environment.
    os.environ["TJ_LAKE_ROOT"] = str(root)
    home = prepare_dagster_home()
    print(f"temporal-joins demo: lake {root}, Dagster home {home}", flush=True)
    started = time.monotonic()
    result = run(root, sample=SampleConfig(waves=args.waves))
    ok = (all(result.checks_after.values()) and all(result.deliveries.checks_after.values())
          and all(result.accounts.checks_after.values())
          and all(result.accounts.orders.checks_after.values()))
    print(f"done in {time.monotonic() - started:.0f}s; checks after the backfill "
          f"{'all pass' if ok else 'FAILED'}. Browse the history: ./tj dev -> http://127.0.0.1:3000"
          + ("" if args.root is None else f" (with TJ_LAKE_ROOT={root})"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
