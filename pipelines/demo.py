"""The demo (`./tj demo`, i.e. `python -m pipelines.demo`): orders enriched with currency rates.

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
import shutil
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.sample_data import SampleConfig

REPO = Path(__file__).resolve().parents[1]
MARKER = ".tj-demo-root"
QUIET_RUN = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _fresh_root(root: Path) -> None:
    """Empty the demo lake root; refuse to wipe a directory the demo did not create."""
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise SystemExit(f"{root} is not empty and was not created by the demo (no {MARKER}); "
                         f"pass --root with an empty or demo directory")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / MARKER).write_text("created by python -m pipelines.demo; wiped on every demo run\n")


def _value(v: Any) -> Any:
    return getattr(v, "value", getattr(v, "text", v))


def _md(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _value(v) for k, v in metadata.items()}


@dataclass
class Events:
    """The asset events and check evaluations of one run, metadata as plain values."""

    materializations: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    observations: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # (check, partition, passed, severity, description, metadata)
    checks: list[tuple[str, str | None, bool, str, str | None, dict[str, Any]]] = field(
        default_factory=list)


def _events(result: Any) -> Events:
    out = Events()
    for ev in result.all_events:
        kind = ev.event_type_value
        data = ev.event_specific_data
        if kind == "ASSET_MATERIALIZATION":
            m = data.materialization
            out.materializations.append((m.partition, _md(m.metadata)))
        elif kind == "ASSET_OBSERVATION":
            obs = data.asset_observation
            out.observations.append((obs.asset_key.to_user_string(), _md(obs.metadata)))
        elif kind == "ASSET_CHECK_EVALUATION":
            out.checks.append((data.check_name, data.partition, data.passed, data.severity.value,
                               data.description, _md(data.metadata)))
    return out


class Demo:
    """Ticks sensors and schedules in-process and executes what they ask, recorded in the
    instance under the code location `./tj dev` loads (`pipelines.recording`: the UI then shows
    the runs per job and the ticks and cursors per sensor)."""

    def __init__(self, root: Path, instance: Any | None = None, *, echo: bool = True) -> None:
        import dagster as dg

        from pipelines.recording import Recorder

        self.dg = dg
        self.root = root
        self.echo = echo
        self.instance = instance if instance is not None else dg.DagsterInstance.get()
        self.recorder = Recorder(self.instance)
        self.reload()
        self.t0 = time.monotonic()

    def reload(self) -> None:
        """Build the definitions again: the join's partitions fit the data landed so far (what
        reloading the code location does in the UI)."""
        from pipelines.definitions import DEMO_SPEC, build_definitions

        self.defs = build_definitions([DEMO_SPEC], lake_root=str(self.root))

    def say(self, text: str) -> None:
        if self.echo:
            print(f"[{time.monotonic() - self.t0:5.1f}s] {text}", flush=True)

    def table(self, text: str) -> None:
        if self.echo:
            print(text, flush=True)

    def tick(self, sensor_name: str) -> tuple[list[Any], str | None, Any]:
        """One recorded tick: (run requests, skip reason, `ran(run_id, run_key)`)."""
        sensor = self.defs.resolve_sensor_def(sensor_name)

        def evaluate(cursor: str | None) -> Any:
            return sensor.evaluate_tick(self.dg.build_sensor_context(
                instance=self.instance, cursor=cursor, sensor_name=sensor_name,
                resources=self.defs.resources, definitions=self.defs))

        data, ran = self.recorder.sensor_tick(sensor_name, sensor.minimum_interval_seconds or 30,
                                              evaluate)
        return list(data.run_requests or []), data.skip_message, ran

    def execute(self, job_name: str, request: Any | None = None, *, sensor: str | None = None,
                schedule: str | None = None) -> Events:
        job = self.defs.resolve_job_def(job_name)
        run_config = dict(QUIET_RUN)
        if request is not None:
            run_config.update(request.run_config or {})
        tags = self.recorder.run_tags(sensor=sensor, schedule=schedule, request=request)
        result = self.recorder.execute(job, run_config=run_config, tags=tags)
        if not result.success:
            raise SystemExit(f"run of {job_name} failed (see `./tj dev` for its logs)")
        self.last_run_id = result.run_id
        return _events(result)

    def sensor_runs(self, sensor_name: str) -> Iterator[Events]:
        requests, skip, ran = self.tick(sensor_name)
        if not requests:
            self.say(f"  {sensor_name}: skipped: {skip}")
        sensor = self.defs.resolve_sensor_def(sensor_name)
        for rr in requests:
            events = self.execute(rr.job_name or sensor.job_name, rr, sensor=sensor_name)
            ran(self.last_run_id, rr.run_key)
            yield events


def _batch_line(md: Mapping[str, Any]) -> str:
    return (f"batch {md['batch_id']}: {md['batch_rows_in_stream']} orders + "
            f"{md['batch_rows_in_table']} rates in, {md['batch_rows_out']} rows out, "
            f"{md['batch_late_joined']} late joined, {md['batch_still_buffered']} still buffered; "
            f"event days {md['event_days_touched']}; output Delta v{md['delta_version']}")


def _fmt_ts(ms: int | None) -> str:
    if ms is None:
        return "-"
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).strftime("%m-%d %H:%M")


def _print_checks(demo: Demo, events: Events) -> dict[str, bool]:
    """Print each check's verdict (and each event day's, for a check per day); returns the
    verdict of each check as a whole (a check run on days only: all its days passed)."""
    result: dict[str, bool] = {}
    days: dict[str, list[bool]] = {}
    for name, partition, passed, severity, description, _ in sorted(
            events.checks, key=lambda c: (c[0], c[1] is None, c[1] or "")):
        verdict = "PASS" if passed else f"FAIL ({severity})"
        if partition is None:
            demo.say(f"  check {name}: {verdict} - {description}")
            result[name] = passed
        else:
            demo.table(f"      day {partition}: {verdict} - {description}")
            days.setdefault(name, []).append(passed)
    for name, verdicts in days.items():
        result.setdefault(name, all(verdicts))
    return result


@dataclass
class DemoResult:
    """What the demo did, for tests: per-batch metadata, checks before and after the backfill."""

    batches: list[dict[str, Any]] = field(default_factory=list)
    checks_before: dict[str, bool] = field(default_factory=dict)
    checks_after: dict[str, bool] = field(default_factory=dict)
    backfill: dict[str, Any] = field(default_factory=dict)


def run(root: Path, *, sample: SampleConfig | None = None, instance: Any | None = None,
        echo: bool = True) -> DemoResult:
    """Land the sample data wave by wave, ingest and micro-batch it through the sensors, run the
    nightly backfill, check. `instance`: the Dagster instance (default: DAGSTER_HOME's)."""
    from joins import audit
    from joins.pipeline import PipelineLayout, parse_pipeline_spec
    from pipelines.definitions import DEMO_SPEC
    from pipelines.sample_data import generate, write_wave

    _fresh_root(root)
    demo = Demo(root, instance, echo=echo)
    # The lake was wiped: so is what the instance knew of it (asset history, sensor cursors).
    demo.recorder.reset_pipelines(demo.defs)
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
        for ev in demo.sensor_runs(f"{spec.name}_microbatch_sensor"):
            mds = [md for _, md in ev.materializations] or [md for k, md in ev.observations
                                                              if k == spec.name]
            if mds and "batch_id" in mds[0]:
                out.batches.append(mds[0])
                demo.say(f"  micro-{_batch_line(mds[0])}")
    _, skip, _ = demo.tick(f"{spec.name}_microbatch_sensor")
    demo.say(f"micro-batch sensor ticks again: skipped: {skip}")
    # The join's partitions now reach the day of its stream time (the UI reloads its location).
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

    demo.say("asset checks after the micro-batches (the staleness sensor runs them over the "
             "late-data horizon):")
    [checks] = list(demo.sensor_runs(f"{spec.name}_staleness_sensor"))
    out.checks_before = _print_checks(demo, checks)

    name = f"{spec.name}_nightly_backfill"
    schedule = demo.defs.resolve_schedule_def(name)
    tick = schedule.evaluate_tick(demo.dg.build_schedule_context(
        instance=demo.instance, scheduled_execution_time=dt.datetime.now(dt.UTC),
        resources=demo.defs.resources))
    requests = list(tick.run_requests or [])
    ran = demo.recorder.schedule_tick(name, schedule.cron_schedule, requests[0] if requests else None,
                                      tick.skip_message)
    if not requests:
        raise SystemExit(f"nightly backfill: skipped: {tick.skip_message}")
    ev = Events()
    for rr in requests:
        first = rr.tags["dagster/asset_partition_range_start"]
        last = rr.tags["dagster/asset_partition_range_end"]
        demo.say(f"nightly backfill schedule: one run over event days {first} .. {last} "
                 f"({rr.tags['tj/why']})")
        done = demo.execute(schedule.job_name, rr, schedule=name)
        ran(demo.last_run_id, rr.run_key)
        ev.materializations += done.materializations
        ev.checks += done.checks
    out.backfill = ev.materializations[0][1] if ev.materializations else {}
    md = out.backfill
    demo.say(f"backfill: {md.get('backfill_rows_out')} rows for {md.get('event_days_touched')} in one commit "
             f"(output Delta v{md.get('delta_version')}); agreement with the micro-batches:")
    for line in str(md.get("difference", "")).splitlines():
        demo.table(f"    {line}")
    demo.say("asset checks after the backfill:")
    out.checks_after = _print_checks(demo, ev)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.demo",
                                     description="orders enriched with currency rates, end to end")
    parser.add_argument("--root", default=None,
                        help="demo lake root (default: TJ_LAKE_ROOT or ./var/lake); wiped first")
    parser.add_argument("--waves", type=int, default=SampleConfig.waves,
                        help="landing waves, one micro-batch each")
    parser.add_argument("--live", action="store_true",
                        help="instead: the Dagster UI with sensors on and data landing "
                             "(python -m pipelines.live_demo --help)")
    args, rest = parser.parse_known_args(argv)
    if args.live:
        from pipelines.live_demo import main as live

        return live([*(["--root", args.root] if args.root else []), *rest])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    # Library warnings (beta APIs, Spark) are not the demo's output.
    warnings.filterwarnings("ignore")
    # The demo's data is tiny: few shuffle partitions mean few tasks per Spark job.
    os.environ.setdefault("TJ_SHUFFLE_PARTITIONS", "2")
    from pipelines.definitions import lake_root_from_env
    from pipelines.instance import prepare_dagster_home

    root = Path(args.root or lake_root_from_env()).resolve()
    # Runs re-executed from the UI and the code location read the lake from the environment.
    os.environ["TJ_LAKE_ROOT"] = str(root)
    home = prepare_dagster_home()
    print(f"temporal-joins demo: lake {root}, Dagster home {home}", flush=True)
    started = time.monotonic()
    result = run(root, sample=SampleConfig(waves=args.waves))
    ok = all(result.checks_after.values())
    print(f"done in {time.monotonic() - started:.0f}s; checks after the backfill "
          f"{'all pass' if ok else 'FAILED'}. Browse the history: ./tj dev -> http://127.0.0.1:3000"
          + ("" if args.root is None else f" (with TJ_LAKE_ROOT={root})"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
