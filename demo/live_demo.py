"""The live demo (`./tj demo --live`, i.e. `python -m demo.live_demo`): the Dagster UI on
127.0.0.1 with the sensors and the nightly schedule on, and a generator that lands out-of-order,
late and bad orders and rates every few seconds (`live_data.py`).

What to watch in the UI (http://127.0.0.1:3000 by default):

- Automation: the landing sensors request ingest runs, the micro-batch sensor requests
  micro-batches, the staleness sensor runs the agreement check after them: each with its ticks,
  runs and cursor;
- Catalog -> orders_with_rates: one partition per event day with data (the code location is
  reloaded as stream time reaches a new day), each day's rows; Checks -> the agreement check's
  partitions: a day late rate corrections made stale turns failed, and passes again once the
  nightly schedule backfilled it. Event days pass in minutes here, so "nightly" runs every
  `--backfill-every` minutes;
- orders_with_rates_quarantine: bad and expired rows with their reasons; the grace buffer; the
  landing folders.

The demo lake (`--root`, default TJ_LAKE_ROOT or ./var/lake) and the instance's history are kept
from one run to the next: the generator goes on after the last wave landed (it is seeded, so the
waves are the ones an uninterrupted run lands). `--fresh` wipes the lake, the history of the
pipeline's assets and its sensors' cursors first, as `./tj demo` does. Waves are paced by the
pipeline's progress: while more than `--max-behind` landed files wait for an ingest, no wave
lands, and every wave says how far the join's stream time trails the landed event time.
Ctrl-C stops the generator and the UI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

from demo.arguments import lake_root, seconds, whole
from demo.live_data import LiveConfig, LiveGenerator
from joins.core.human import duration, iso_time
from runplatform.dagster_server import DagsterServer
from runplatform.dev import WarmSpark, refuse_a_taken_port, run_worker, warm_spark

LOCATION = "pipelines.definitions"
LIVE_MARKER = ".tj-live-demo"


def live_spec(*, sensor_interval_s: int, backfill_every_min: int) -> dict[str, Any]:
    """The demo's pipeline with the pace of the live demo: sensors every few seconds, the
    agreement check at most every 30 s, the "nightly" backfill every few minutes."""
    from pipelines.definitions import DEMO_SPEC

    return {**DEMO_SPEC, "sensor_interval_s": sensor_interval_s, "check_interval_s": 30,
            "backfill_cron": f"*/{backfill_every_min} * * * *"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.live_demo",
                                     description="the Dagster UI with sensors on and data landing")
    parser.add_argument("--root", default=None,
                        help="demo lake root (kept from run to run; --fresh wipes it)")
    parser.add_argument("--fresh", action="store_true",
                        help="wipe the lake and the pipeline's Dagster history first")
    parser.add_argument("--port", type=whole(1, 65535), default=int(os.environ.get("PORT", "3000")))
    parser.add_argument("--interval", type=seconds, default=5.0, help="seconds between waves")
    parser.add_argument("--waves", type=whole(0), default=0,
                        help="stop landing after wave N (counted over runs; 0: never)")
    parser.add_argument("--max-behind", type=whole(0), default=4, metavar="FILES",
                        help="land no wave while more landed files than this wait for an ingest")
    parser.add_argument("--backfill-every", type=whole(1), default=3, metavar="MIN",
                        help="minutes between runs of the 'nightly' backfill schedule")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    from demo.demo_runner import fresh_root as _fresh_root
    from demo.sample_data import write_wave
    from joins.pipeline import PipelineLayout, parse_pipeline_spec
    from joins.pipeline.observe import data_days, landing_status
    from pipelines.definitions import build_definitions, lake_root_from_env
    from runplatform.instance import prepare_dagster_home

    root = lake_root(parser, Path(args.root or lake_root_from_env()).resolve())
    refuse_a_taken_port(args.port, "./tj demo --live")
    # Only a lake this live demo made is kept: `./tj demo` lands other waves in the same folders.
    fresh = args.fresh or not (root / LIVE_MARKER).exists()
    if fresh:
        _fresh_root(root)   # refuses a folder the demo did not create
        (root / LIVE_MARKER).write_text("the live demo's lake: kept from run to run\n")
    specs = root / "specs"
    specs.mkdir(exist_ok=True)
    raw = live_spec(sensor_interval_s=5, backfill_every_min=args.backfill_every)
    (specs / "orders_with_rates.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {"TJ_LAKE_ROOT": str(root), "TJ_SPECS_DIR": str(specs),
           "TJ_SHUFFLE_PARTITIONS": os.environ.get("TJ_SHUFFLE_PARTITIONS", "2"),
           "TJ_DRIVER_MEMORY": os.environ.get("TJ_DRIVER_MEMORY", "1g")}
    os.environ.update(env)
    home = prepare_dagster_home()

    import dagster as dg

    from demo.recording import Recorder

    instance = dg.DagsterInstance.get()
    defs = build_definitions(lake_root=str(root), spec_dir=specs)
    if fresh:
        Recorder(instance).reset_pipelines(defs)
    else:
        Recorder(instance).turn_on(defs)
    spec = parse_pipeline_spec(raw)
    layout = PipelineLayout(str(root), spec)
    generator = LiveGenerator(LiveConfig(start=spec.start_date,
                                         history_retention_ms=spec.history_retention_ms))
    landed = landed_waves(Path(layout.landing(spec.stream)))
    for _ in range(landed):
        generator.next_wave()   # seeded: the waves already landed, regenerated, not written
    kept = "fresh" if fresh else f"kept, {landed} waves landed; --fresh wipes it"
    print(f"temporal-joins live demo: lake {root} ({kept}), Dagster home {home}", flush=True)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    # The sensors' runs execute in the warm run worker (a Connect server for per-run processes
    # with TJ_RUN_WORKER=0). No warm-up run: the sensors' runs start at once and warm it.
    with run_worker(home, warm_up=False) as worker, \
            (warm_spark(home / "spark-connect", warm_up=False) if worker is None
             else contextlib.nullcontext(WarmSpark({}))) as warm, \
            DagsterServer(home=home, port=args.port, env={**env, **warm.env}) as server:
        print(f"Dagster UI: {server.url}  (sensors and schedule on; Ctrl-C stops)", flush=True)
        loaded_last = None
        try:
            while not stop["now"]:
                stream_time = spec.engine(layout).stream_time()   # the batch log, read once a tick
                waiting = sum(len(landing_status(layout, item).pending)
                              for item in spec.pipeline_inputs() if item.source is not None)
                if waiting > args.max_behind:
                    print(f"waiting: {waiting} landed files not ingested yet; no wave lands until "
                          f"the pipeline catches up", flush=True)
                elif not args.waves or generator.index < args.waves:
                    wave = generator.next_wave()
                    write_wave(wave, orders_dir=Path(layout.landing(spec.stream)),
                               rates_dir=Path(layout.landing(spec.table)))
                    print(f"wave {wave.index}: {len(wave.orders)} orders, {len(wave.rates)} rates "
                          f"landed (event time up to {iso_time(generator.wave_start)}); "
                          f"{_behind(stream_time, generator.wave_start)}",
                          flush=True)
                # Partitions follow the data: reload the location when a new day has data.
                days = data_days(layout, stream_time)
                if days is not None and days[1] != loaded_last:
                    server.reload_location(LOCATION)
                    loaded_last = days[1]
                    print(f"partitions now {days[0]} .. {days[1]} (code location reloaded)",
                          flush=True)
                time.sleep(args.interval)
        except KeyboardInterrupt:
            pass
    print("live demo stopped", flush=True)
    return 0


def landed_waves(orders_dir: Path) -> int:
    """How many waves a kept lake holds: one past the highest `NNNN-orders.jsonl` landed."""
    indexes = [int(p.name[:4]) for p in orders_dir.glob("[0-9][0-9][0-9][0-9]-orders.jsonl")]
    return max(indexes) + 1 if indexes else 0


def _behind(stream_time: int | None, landed_ms: int) -> str:
    if stream_time is None:
        return "the join has not run yet"
    return f"the join's stream time trails it by {duration(max(0, landed_ms - stream_time))}"


if __name__ == "__main__":
    sys.exit(main())
