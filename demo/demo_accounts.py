"""The demo's second pipeline: customers joined with their accounts by primary key
(`customer_accounts`, a table-table join of two versioned changelogs with out-of-order updates)
and a count per country on top (`accounts_per_country`), driven like the first pipeline through
the sensors, the checks job and the nightly backfill schedule.

Prints per micro-batch the updates in per side, results out, out-of-order updates ignored and
expired ones; the current results and the temporal history of one customer; the count per
country; the checks before and after the backfill that writes the temporal history. With each
wave the foreign-key join `orders_with_customer` (`demo_order_customer.py`) takes its order
updates and the same customer files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demo.demo_order_customer import OrderCustomerResult, ingest_and_join
from demo.demo_order_customer import land as land_orders
from demo.demo_order_customer import summary as fk_summary
from demo.demo_runner import microbatches
from demo.demo_runner import short_ts as _ts
from demo.sample_accounts import generate_accounts, write_accounts_wave
from demo.sample_data import SampleConfig
from demo.sample_order_customers import generate_order_customers
from pipelines.definitions import ACCOUNTS_SPEC, COUNT_SPEC, FK_SPEC

if TYPE_CHECKING:
    from demo.demo_runner import Demo

JOIN_SPEC = ACCOUNTS_SPEC


@dataclass
class AccountsResult:
    batches: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    checks_before: dict[str, bool] = field(default_factory=dict)
    checks_after: dict[str, bool] = field(default_factory=dict)
    history_rows: int = 0
    orders: OrderCustomerResult = field(default_factory=OrderCustomerResult)


def _line(md: dict[str, Any]) -> str:
    return (f"batch {md['batch_id']}: {md.get('batch_rows_in_left', 0)} customer + "
            f"{md.get('batch_rows_in_right', 0)} account updates in, {md['batch_rows_out']} results "
            f"out ({md.get('batch_tombstones_out', 0)} deletes); out of order ignored "
            f"{md.get('batch_out_of_order_ignored_left', 0)} + "
            f"{md.get('batch_out_of_order_ignored_right', 0)}, expired "
            f"{md.get('batch_expired_left', 0)} + {md.get('batch_expired_right', 0)}; output Delta "
            f"v{md['delta_version']}")


def run_accounts(demo: Demo, root: Path, cfg: SampleConfig) -> AccountsResult:
    from pyspark.sql import functions as F

    from joins import lake
    from joins.changelog.keyed import latest_per_key
    from joins.operators.table_table_join.backfill import current_results
    from joins.pipeline import PipelineLayout, parse_pipeline_spec
    from pipelines.factory import checks_job_name

    out = AccountsResult()
    spec = parse_pipeline_spec(JOIN_SPEC)
    count = parse_pipeline_spec(COUNT_SPEC)
    layout = PipelineLayout(str(root.resolve()), spec)
    waves = generate_accounts(cfg)
    fk = parse_pipeline_spec(FK_SPEC)
    fk_out = OrderCustomerResult()
    order_waves = generate_order_customers(cfg, [w.customers for w in waves])
    demo.say(f"second pipeline `{spec.name}`: {sum(len(w.customers) for w in waves)} customer and "
             f"{sum(len(w.accounts) for w in waves)} account updates in {len(waves)} waves, out of "
             f"order on both sides, one expired; `{count.name}` counts its results per country; "
             f"`{fk.name}` enriches {sum(len(w) for w in order_waves)} order updates with their "
             f"customer (foreign key)")
    for wave in waves:
        files = write_accounts_wave(wave, customers_dir=Path(layout.landing(spec.left)),
                                    accounts_dir=Path(layout.landing(spec.right)))
        demo.say(f"wave {wave.index}: landed {files[0].name}, {files[1].name}")
        land_orders(demo, fk, wave.index, order_waves[wave.index])
        for source in (spec.left, spec.right):
            for ev in demo.sensor_runs(f"{source.name}_landing_sensor"):
                for _, md in ev.materializations:
                    demo.say(f"  ingest {source.name} batch {md['batch_id']}: {md['rows_in']} rows "
                             f"(Delta v{md['delta_version']})")
        for md in microbatches(demo, spec):
            out.batches.append(md)
            demo.say(f"  micro-{_line(md)}")
        for md in microbatches(demo, count):
            demo.say(f"  {count.name} batch {md['batch_id']}: {md['batch_rows_in']} join results "
                     f"in, {md['batch_rows_out']} country counts out")
        ingest_and_join(demo, fk, fk_out)

    session = demo.defs.resources["spark"].get_session()
    state = lake.read_delta(session, f"{layout.join_root}/current")
    join_spec, cols = spec.engine_spec(), spec.columns()
    current = current_results(state, join_spec, cols)
    history_path = f"{layout.join_root}/history"
    demo.say(f"current results: {current.count()} customers have an account")
    counts = latest_per_key(lake.read_delta(session, PipelineLayout(str(root.resolve()), count).output),
                            "key").where("not tombstone").collect()
    out.counts = {r["key"]: int(r["count"]) for r in counts}
    demo.say("customers with an account per country: "
             + ", ".join(f"{k} {n}" for k, n in sorted(out.counts.items())))

    demo.say(f"asset checks of {spec.name} after the micro-batches:")
    from demo.demo_runner import _print_checks

    checks = list(demo.sensor_runs(f"{spec.name}_staleness_sensor"))
    out.checks_before = _print_checks(demo, checks[0] if checks else
                                      demo.execute(checks_job_name(spec)))
    # The nightly schedule backfills the days found stale (all of the horizon when the check
    # has looked at none): here it writes the temporal history.
    ev = demo.nightly(spec)
    md = ev.materializations[0][1] if ev.materializations else {}
    demo.say(f"nightly backfill of {spec.name}: the temporal history of event days "
             f"{md.get('event_days_touched')}, {md.get('backfill_rows_out')} intervals in one "
             f"commit (Delta v{md.get('delta_version')})")
    history = lake.read_delta(session, history_path)
    out.history_rows = history.count()
    # The customer whose result changed most often (a handful of rows reach the driver).
    who = history.groupBy("customer_id").count().orderBy(F.desc("count"), "customer_id").first()[0]
    row = current.where(current["customer_id"] == who).first()
    now = "no result now" if row is None else (f"now: country {row['left_country']}, balance "
                                               f"{row['right_balance']}")
    demo.say(f"temporal history of {who} (what the join held at every event time; {now}):")
    for r in history.where(history["customer_id"] == who).orderBy("valid_from").collect():
        demo.table(f"    {_ts(r['valid_from'])} .. {_ts(r['valid_to']):<11} country "
                   f"{r['left_country']}, balance {r['right_balance']}")
    demo.say(f"asset checks of {spec.name} after the backfill:")
    out.checks_after = _print_checks(demo, ev)
    fk_summary(demo, fk, fk_out)
    out.orders = fk_out
    return out
