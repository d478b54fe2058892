"""The demo's driver: ticks sensors and schedules in-process and executes what they ask for,
recording the asset events of each run (`demo.py` tells the story, this runs it)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

QUIET_RUN = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _value(v: Any) -> Any:
    return getattr(v, "value", getattr(v, "text", v))


def _md(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _value(v) for k, v in metadata.items()}


@dataclass
class Events:
    """The asset events and check evaluations of one run, metadata as plain values."""

    materializations: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    checks: list[tuple[str, bool, str, str | None, dict[str, Any]]] = field(default_factory=list)


def _events(result: Any) -> Events:
    out = Events()
    for ev in result.all_events:
        kind = ev.event_type_value
        data = ev.event_specific_data
        if kind == "ASSET_MATERIALIZATION":
            m = data.materialization
            out.materializations.append((m.partition, _md(m.metadata)))
        elif kind == "ASSET_OBSERVATION":
            out.observations.append(_md(data.asset_observation.metadata))
        elif kind == "ASSET_CHECK_EVALUATION":
            out.checks.append((data.check_name, data.passed, data.severity.value, data.description,
                               _md(data.metadata)))
    return out


class Demo:
    """Ticks sensors and schedules in-process (cursors kept here) and executes what they ask."""

    def __init__(self, root: Path, instance: Any | None = None, *, echo: bool = True) -> None:
        import dagster as dg

        from pipelines.definitions import DELIVERIES_SPEC, DEMO_SPEC, build_definitions
        from pipelines.demo_accounts import COUNT_SPEC, JOIN_SPEC
        from pipelines.demo_order_customer import SPEC as FK_SPEC

        self.dg = dg
        self.root = root
        self.echo = echo
        self.defs = build_definitions([DEMO_SPEC, DELIVERIES_SPEC, JOIN_SPEC, COUNT_SPEC,
                                       FK_SPEC],
                                      lake_root=str(root))
        self.instance = instance if instance is not None else dg.DagsterInstance.get()
        self.cursors: dict[str, str | None] = {}
        self.t0 = time.monotonic()

    def say(self, text: str) -> None:
        if self.echo:
            print(f"[{time.monotonic() - self.t0:5.1f}s] {text}", flush=True)

    def table(self, text: str) -> None:
        if self.echo:
            print(text, flush=True)

    def tick(self, sensor_name: str) -> tuple[list[Any], str | None]:
        sensor = self.defs.resolve_sensor_def(sensor_name)
        ctx = self.dg.build_sensor_context(
            instance=self.instance, cursor=self.cursors.get(sensor_name), sensor_name=sensor_name,
            resources=self.defs.resources, definitions=self.defs)
        data = sensor.evaluate_tick(ctx)
        self.cursors[sensor_name] = data.cursor
        return list(data.run_requests or []), data.skip_message

    def execute(self, job_name: str, request: Any | None = None, **kwargs: Any) -> Events:
        job = self.defs.resolve_job_def(job_name)
        run_config = dict(QUIET_RUN)
        tags: dict[str, str] = {}
        if request is not None:
            run_config.update(request.run_config or {})
            tags.update(request.tags or {})
            if request.run_key:
                tags["dagster/run_key"] = request.run_key
        result = job.execute_in_process(instance=self.instance, run_config=run_config, tags=tags,
                                        **kwargs)
        if not result.success:
            raise SystemExit(f"run of {job_name} failed (see `./tj dev` for its logs)")
        return _events(result)

    def sensor_runs(self, sensor_name: str) -> Iterator[Events]:
        requests, skip = self.tick(sensor_name)
        if not requests:
            self.say(f"  {sensor_name}: skipped: {skip}")
        sensor = self.defs.resolve_sensor_def(sensor_name)
        for rr in requests:
            yield self.execute(rr.job_name or sensor.job_name, rr)


def ingest_sources(demo: Demo, sources: Any) -> None:
    """Tick the sources' landing sensors and run the ingests they ask for."""
    for source in sources:
        for ev in demo.sensor_runs(f"{source.name}_landing_sensor"):
            for _, md in ev.materializations:
                demo.say(f"  ingest {source.name} batch {md['batch_id']}: {md['stored']} stored, "
                         f"{md['quarantined']} quarantined (Delta v{md['delta_version']})")


def microbatches(demo: Demo, spec: Any) -> Iterator[dict[str, Any]]:
    """Tick the join's micro-batch sensor, run what it asks for: each batch's metadata."""
    for ev in demo.sensor_runs(f"{spec.name}_microbatch_sensor"):
        mds = [md for _, md in ev.materializations] or ev.observations
        if mds and "batch_id" in mds[0]:
            yield mds[0]


def _print_checks(demo: Demo, events: Events) -> dict[str, bool]:
    result = {}
    for name, passed, severity, description, _ in sorted(events.checks):
        verdict = "PASS" if passed else f"FAIL ({severity})"
        demo.say(f"  check {name}: {verdict} - {description}")
        result[name] = passed
    return result


def checks_and_nightly_backfill(demo: Demo, spec: Any) -> tuple[dict[str, bool], dict[str, Any],
                                                              dict[str, bool]]:
    """Run the join's checks, its nightly backfill (as the schedule asks), and report: (checks
    before, the backfill's metadata, checks after)."""
    from pipelines.definitions import checks_job_name

    demo.say(f"asset checks of {spec.name} after the micro-batches:")
    before = _print_checks(demo, demo.execute(checks_job_name(spec)))
    schedule = demo.defs.resolve_schedule_def(f"{spec.name}_nightly_backfill")
    tick = schedule.evaluate_tick(demo.dg.build_schedule_context(
        instance=demo.instance, scheduled_execution_time=dt.datetime.now(dt.UTC)))
    requests = list(tick.run_requests or [])
    if not requests:
        raise SystemExit(f"nightly backfill of {spec.name}: skipped: {tick.skip_message}")
    rr = requests[0]
    first = rr.tags["dagster/asset_partition_range_start"]
    last = rr.tags["dagster/asset_partition_range_end"]
    demo.say(f"nightly backfill schedule of {spec.name}: one run over event days {first} .. {last} "
             f"(horizon {rr.tags['tj/horizon_days']} days, ending at {rr.tags['tj/horizon_basis']})")
    ev = demo.execute(schedule.job_name, rr)
    md = ev.materializations[0][1] if ev.materializations else {}
    demo.say(f"backfill: {md.get('rows_out')} rows for {md.get('event_days_touched')} in one commit "
             f"(output Delta v{md.get('delta_version')}); agreement with the micro-batches:")
    for line in str(md.get("difference", "")).splitlines():
        demo.table(f"    {line}")
    demo.say(f"asset checks of {spec.name} after the backfill:")
    return before, md, _print_checks(demo, ev)
