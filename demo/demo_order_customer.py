"""The demo's foreign-key join (seed 004, KIP-213): orders enriched with their customer
(`orders_with_customer`), driven wave by wave next to the accounts pipeline, whose `customers`
source (one changelog table) it reads too.

Per wave: the order updates land, the landing sensors ingest them and the customer files,
the micro-batch sensor runs the join. Each batch reports KIP-213's traffic: live
subscriptions, the fan-out of customer changes to their orders, stale responses discarded (an
order that moved twice within one batch), results out. At the end: one order's results (it
moved between customers), the nightly backfill of the temporal history and the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo.demo_runner import Demo, _print_checks, ingest_sources, microbatches
from demo.sample_order_customers import write_order_updates
from pipelines.definitions import FK_SPEC

SPEC = FK_SPEC


@dataclass
class OrderCustomerResult:
    batches: list[dict[str, Any]] = field(default_factory=list)
    checks_after: dict[str, bool] = field(default_factory=dict)
    backfill: dict[str, Any] = field(default_factory=dict)


def land(demo: Demo, spec: Any, index: int, records: list[dict[str, Any]]) -> None:
    folder = Path(_layout(demo, spec).landing(spec.left))
    path = write_order_updates(index, records, folder)
    demo.say(f"wave {index}: landed {path.name} ({len(records)} order updates)")


def ingest_and_join(demo: Demo, spec: Any, out: OrderCustomerResult) -> None:
    """One wave of the foreign-key join pipeline, driven by its sensors."""
    ingest_sources(demo, (spec.left, spec.right))
    for md in microbatches(demo, spec):
        out.batches.append(md)
        demo.say(f"  {spec.name} batch {md['batch_id']}: {md['batch_rows_in_left']} order + "
                 f"{md['batch_rows_in_right']} customer updates in; {md['batch_subscriptions']} "
                 f"subscriptions, fan-out {md['batch_fan_out']}, {md['batch_stale_discarded']} stale "
                 f"discarded, {md['batch_rows_out']} results out")


def summary(demo: Demo, spec: Any, out: OrderCustomerResult) -> None:
    """Per-batch traffic, one order that moved, the nightly backfill with the checks."""
    from joins import lake

    demo.say(f"{spec.name}: per batch (KIP-213 traffic):")
    demo.table(f"    {'batch':>5} {'orders':>6} {'custs':>5} {'subs':>4} {'sent':>4} {'answers':>7} "
               f"{'fan-out':>7} {'stale':>5} {'out':>4} {'ooo L/R':>7}")
    for md in out.batches:
        demo.table(f"    {md['batch_id']:>5} {md['batch_rows_in_left']:>6} {md['batch_rows_in_right']:>5} "
                   f"{md['batch_subscriptions']:>4} {md['batch_subscriptions_sent']:>4} "
                   f"{md['batch_answers']:>7} "
                   f"{md['batch_fan_out']:>7} {md['batch_stale_discarded']:>5} {md['batch_rows_out']:>4} "
                   f"{md['batch_out_of_order_ignored_left']:>3}/{md['batch_out_of_order_ignored_right']}")
    from demo.demo_runner import short_ts as _ts

    session = demo.defs.resources["spark"].get_session()
    output = lake.read_delta(session, _layout(demo, spec).output)
    # The order whose result changed most often (a handful of rows reach the driver).
    who = output.groupBy("order_id").count().orderBy("count", "order_id", ascending=[False, True]).first()[0]
    demo.say(f"what the join emitted for {who} (it moved between customers):")
    for r in output.where(output["order_id"] == who).orderBy("_batch_id", "_emit_seq").collect():
        result = ("cancelled: tombstone" if r["tombstone"] else
                  f"customer {r['left_customer_id']} -> " + (
                      f"{r['right_name']} ({r['right_country']})" if r["has_right"] else "none"))
        demo.table(f"    batch {r['_batch_id']} ts {_ts(r['ts'])}: {result}")
    ev = demo.nightly(spec)
    out.backfill = ev.materializations[0][1] if ev.materializations else {}
    demo.say(f"nightly backfill of {spec.name}: the temporal history of event days "
             f"{out.backfill.get('event_days_touched')}, {out.backfill.get('backfill_rows_out')} "
             f"intervals in one commit (Delta v{out.backfill.get('delta_version')}); its checks:")
    out.checks_after = _print_checks(demo, ev)


def _layout(demo: Demo, spec: Any) -> Any:
    from joins.pipeline import PipelineLayout

    return PipelineLayout(str(demo.root.resolve()), spec)
