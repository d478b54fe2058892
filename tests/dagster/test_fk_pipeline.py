"""The foreign-key join through the Dagster factory (issue 11, item 4): two changelog assets and
an fk-join asset from the YAML spec; per-batch metadata (subscriptions, fan-out, stale
responses discarded, results out) as numbers; the checks; a backfill of the temporal history."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.factory import build_pipeline_assets, layout_of
from demo.demo_order_customer import SPEC
from joins import lake
from joins.errors import ConfigError
from joins.pipeline import parse_pipeline_spec
from pipelines.definitions import build_definitions
from pipelines.factory import checks_job_name
from resources import LakeResource, SparkResource
from tests.dagster.instances import memory_instance
from tests.dagster.test_materialize import QUIET, _batch, _checks, _materializations

DAY1 = 1_709_251_200_000          # 2024-03-01T00:00Z
HOUR = 3_600_000


def test_the_yaml_spec_builds_two_changelog_assets_and_the_join() -> None:
    ja = build_pipeline_assets(SPEC)
    assert [a.key.to_user_string() for a in ja.assets] == [
        "order_updates", "customers", "orders_with_customer", "order_updates_landing",
        "customers_landing", "orders_with_customer_quarantine"]
    assert [i.kind for i in ja.spec.pipeline_inputs()] == ["changelog", "changelog"]
    cols = ja.spec.columns()
    assert (cols.key, cols.right.key, cols.foreign_key) == ("order_id", "customer_id", "customer_id")
    assert ja.spec.engine_spec().join == "left"


@pytest.mark.parametrize(("changes", "fragment"), [
    ({"foreign_key": "customer"}, "config.foreign_key: 'customer' is not a value column"),
    ({"left": {**SPEC["left"], "value_columns": [{"name": "customer_id", "type": "long"}]}},
     "config.foreign_key: 'customer_id' is long but the right key 'customer_id' is string"),
    ({"join": "outer"}, "config.join"),
    ({"right": {**SPEC["right"], "history_retention_ms": None}},
     "config.right.history_retention_ms: required when right.versioned is true"),
])
def test_spec_errors_name_the_setting(changes: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        parse_pipeline_spec({**copy.deepcopy(SPEC), **changes})


def _order(oid: str, customer: str | None, ts: int, *, cancelled: bool = False) -> dict[str, Any]:
    return {"order_id": oid, "customer_id": customer, "amount": None if cancelled else 10.0,
            "cancelled": cancelled, "ts": ts}


def _customer(cid: str, country: str | None, ts: int, *, deleted: bool = False) -> dict[str, Any]:
    return {"customer_id": cid, "name": None if deleted else f"name {cid}", "country": country,
            "deleted": deleted, "ts": ts}


WAVES = [
    ([_customer("c1", "NL", DAY1 + HOUR), _customer("c2", "FR", DAY1 + HOUR)],
     [_order("o1", "c1", DAY1 + 2 * HOUR), _order("o2", "c2", DAY1 + 2 * HOUR),
      _order("o3", None, DAY1 + 2 * HOUR)]),
    # c1 moves country: its fan-out answers o1 and o2's subscription to c1, which o2 has
    # already left again by then (the batch interleaves both tables by arrival index: o2→c1,
    # c3, o2→c2, c1, ...): that response is stale. o3 gets a customer; one late order update.
    ([_customer("c3", "BE", DAY1 + 4 * HOUR), _customer("c1", "DE", DAY1 + 5 * HOUR)],
     [_order("o2", "c1", DAY1 + 6 * HOUR), _order("o2", "c2", DAY1 + 7 * HOUR),
      _order("o3", "c2", DAY1 + 8 * HOUR), _order("o1", "c2", DAY1)]),
    # The next day: c2 deleted (o2, o3 keep their left row: a left join), o1 cancelled.
    ([_customer("c2", None, DAY1 + 26 * HOUR, deleted=True)],
     [_order("o1", None, DAY1 + 27 * HOUR, cancelled=True)]),
]


def _land(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.spark
@pytest.mark.slow
def test_microbatches_metadata_checks_and_backfill(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    resources = {"spark": SparkResource(shuffle_partitions=2), "lake": LakeResource(root=str(root))}
    ja = build_pipeline_assets(SPEC)
    layout = layout_of(resources["lake"], ja.spec)
    defs = build_definitions([SPEC], lake_root=str(root), spark=resources["spark"])
    microbatch = defs.resolve_job_def(ja.microbatch_job_name)
    with memory_instance() as instance:
        batches = []
        for n, (customers, orders) in enumerate(WAVES):
            _land(Path(layout.landing(ja.spec.right)), f"{n:04d}.jsonl", customers)
            _land(Path(layout.landing(ja.spec.left)), f"{n:04d}.jsonl", orders)
            dg.materialize(ja.assets[:2], resources=resources, instance=instance, run_config=QUIET)
            md = _batch(microbatch.execute_in_process(instance=instance, run_config=QUIET),
                        "orders_with_customer")
            for key in ("batch_subscriptions", "batch_subscriptions_sent", "batch_answers",
                        "batch_fan_out", "batch_stale_discarded", "batch_rows_out",
                        "batch_out_of_order_ignored_left"):
                assert isinstance(md[key], int), key  # numeric: Dagster plots it per batch
            batches.append(md)
        first, second, third = batches
        # o3: null FK, no subscription
        assert (first["batch_subscriptions"], first["batch_rows_out"]) == (2, 3)
        assert (second["batch_fan_out"], second["batch_stale_discarded"]) == (2, 1)   # o1; o2 stale
        assert second["batch_out_of_order_ignored_left"] == 1
        assert second["batch_subscriptions"] == 3
        assert third["batch_subscriptions"] == 2 and third["batch_fan_out"] == 2    # c2 deleted: o2, o3
        # The worked example of docs/semantics/fk_join.md: what each batch emitted (the last result per key).
        out = lake.read_delta(spark, layout.output).collect()
        emitted = {(r["_batch_id"], r["order_id"]): (r["right_country"], r["ts"] - DAY1,
                                                    r["tombstone"]) for r in out}
        hour = HOUR
        assert emitted == {
            # o1→c1 comes before c1 in the batch: c1's insert answers it by fan-out, which
            # carries the right update's ts (Kafka's), as does o2's
            (0, "o1"): ("NL", 1 * hour, False), (0, "o2"): ("FR", 1 * hour, False),
            (0, "o3"): (None, 2 * hour, False),
            (1, "o1"): ("DE", 5 * hour, False), (1, "o2"): ("FR", 7 * hour, False),
            (1, "o3"): ("FR", 8 * hour, False),
            (2, "o2"): (None, 26 * hour, False), (2, "o3"): (None, 26 * hour, False),
            (2, "o1"): (None, 27 * hour, True)}
        # The partitions fit the data once the code location loads again (the UI's Reload); the
        # agreement check is per event day, over the data's days as the staleness sensor runs it.
        defs = build_definitions([SPEC], lake_root=str(root), spark=resources["spark"])
        days = {"dagster/asset_partition_range_start": "2024-03-01",
                "dagster/asset_partition_range_end": "2024-03-02"}
        checks = _checks(defs.resolve_job_def(checks_job_name(ja.spec)).execute_in_process(
            instance=instance, run_config=QUIET, tags=days))
        assert checks["latest_equals_temporal_history"], checks
        assert checks["no_duplicate_output_rows"] and checks["quarantine_below_threshold"]
        assert not checks["backfill_agrees_with_stream"]     # no temporal history written yet
        backfill = defs.resolve_job_def(f"{ja.spec.name}_backfill")
        done = backfill.execute_in_process(instance=instance, run_config=QUIET,
                                           partition_key="2024-03-01")
        [(day, md)] = _materializations(done)
        assert day == "2024-03-01" and md["rows_added"] == md["rows_out"] > 0
        backfill.execute_in_process(instance=instance, run_config=QUIET, partition_key="2024-03-02")
        checks = _checks(defs.resolve_job_def(checks_job_name(ja.spec)).execute_in_process(
            instance=instance, run_config=QUIET, tags=days))
        assert all(checks.values()), checks
