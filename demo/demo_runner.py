"""The demo's driver: ticks sensors and schedules in-process and executes what they ask for,
recording the asset events of each run (`run.py` tells the story, this runs it).

Ticks and runs are recorded in the instance under the code location `./tj dev` loads
(`demo.recording`): the UI then shows the runs per job, and the ticks and cursors per
sensor and schedule."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MARKER = ".tj-demo-root"


def fresh_root(root: Path) -> None:
    """Empty the demo lake root; refuse to wipe a directory the demo did not create."""
    import shutil

    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise SystemExit(f"{root} is not empty and was not created by the demo (no {MARKER}); "
                         f"pass --root with an empty or demo directory")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / MARKER).write_text("created by python -m demo; wiped on every demo run\n")


def short_ts(ms: int | None) -> str:
    if ms is None:
        return "..."
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).strftime("%m-%d %H:%M")


QUIET_RUN = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _value(v: Any) -> Any:
    return getattr(v, "value", getattr(v, "text", v))


def _md(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _value(v) for k, v in metadata.items()}


@dataclass
class Events:
    """The asset events and check evaluations of one run, metadata as plain values."""

    materializations: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    observations: list[tuple[str, dict[str, Any]]] = field(default_factory=list)   # (asset, md)
    # (check, partition, passed, severity, description, metadata)
    checks: list[tuple[str, str | None, bool, str, str | None, dict[str, Any]]] = field(
        default_factory=list)

    def observations_of(self, asset: str) -> list[dict[str, Any]]:
        return [md for key, md in self.observations if key == asset]


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
    instance (cursors are the instance's, as the daemon keeps them)."""

    def __init__(self, root: Path, instance: Any | None = None, *, echo: bool = True) -> None:
        import dagster as dg

        from demo.recording import Recorder

        self.dg = dg
        self.root = root
        self.echo = echo
        self.instance = instance if instance is not None else dg.DagsterInstance.get()
        self.recorder = Recorder(self.instance)
        self.last_run_id: str | None = None
        self.reload()
        self.t0 = time.monotonic()

    def reload(self) -> None:
        """Build the definitions again: the joins' partitions fit the data landed so far (what
        reloading the code location does in the UI)."""
        from pipelines.definitions import SPECS_DIR, build_definitions

        # The demo's spec folder, as the code location loads it (its sources shared by joins).
        self.defs = build_definitions(lake_root=str(self.root), spec_dir=SPECS_DIR)

    def forget_lake(self) -> None:
        """The lake was wiped: so is what the instance knew of it (asset history, check
        verdicts, sensor cursors); every sensor and schedule starts afresh."""
        self.recorder.reset_pipelines(self.defs)

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
            # Closed at once: a context left open keeps the instance it opened registered as
            # Dagster's current definitions-state storage after that instance is gone.
            with self.dg.build_sensor_context(
                    instance=self.instance, cursor=cursor, sensor_name=sensor_name,
                    resources=self.defs.resources, definitions=self.defs) as context:
                return sensor.evaluate_tick(context)

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
            raise SystemExit(f"run of {job_name} failed{_step_errors(result)}\n"
                             f"(see `./tj dev` for its logs)")
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

    def nightly(self, spec: Any) -> Events:
        """The nightly backfill schedule's tick, recorded, and the runs it asks for (one per
        range of stale days); their events together."""
        name = f"{spec.name}_nightly_backfill"
        schedule = self.defs.resolve_schedule_def(name)
        # Closed at once: an open schedule context leaves the instance it opened from its ref
        # as Dagster's current definitions-state storage, and later definition loads fail once
        # that instance is collected ("undefined DagsterInstance weakref").
        with self.dg.build_schedule_context(
                instance=self.instance, scheduled_execution_time=dt.datetime.now(dt.UTC),
                resources=self.defs.resources) as context:
            tick = schedule.evaluate_tick(context)
        requests = list(tick.run_requests or [])
        ran = self.recorder.schedule_tick(name, schedule.cron_schedule,
                                          requests[0] if requests else None, tick.skip_message)
        if not requests:
            self.say(f"nightly backfill of {spec.name}: skipped: {tick.skip_message}")
        out = Events()
        for rr in requests:
            self.say(f"nightly backfill schedule of {spec.name}: one run over event days "
                     f"{rr.tags['dagster/asset_partition_range_start']} .. "
                     f"{rr.tags['dagster/asset_partition_range_end']} ({rr.tags['tj/why']})")
            done = self.execute(schedule.job_name, rr, schedule=name)
            ran(self.last_run_id, rr.run_key)
            out.materializations += done.materializations
            out.observations += done.observations
            out.checks += done.checks
        return out


def _step_errors(result: Any) -> str:
    """': step x: <error>' for every failed step of a run, so a failure says why where it is
    reported (a test's output, CI's log), not only in the run's event log."""
    errors = [f"\n  step {ev.step_key}: {ev.step_failure_data.error.to_string().strip()}"
              for ev in result.all_events
              if ev.is_step_failure and ev.step_failure_data and ev.step_failure_data.error]
    return ":" + "".join(errors) if errors else ""


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
        # The batch's numbers are one observation of the join; each day it wrote to has a
        # materialization with that day's rows.
        for md in ev.observations_of(spec.name):
            if "batch_id" in md:
                days = [d for _, d in ev.materializations]
                yield {**(days[0] if days else {}), **md}


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


def checks_and_nightly_backfill(demo: Demo, spec: Any) -> tuple[dict[str, bool], dict[str, Any],
                                                              dict[str, bool]]:
    """Run the join's checks (as the staleness sensor asks: over the late-data horizon, a
    verdict per event day), its nightly backfill of the stale days (as the schedule asks), and
    report: (checks before, the backfill's metadata, checks after)."""
    from pipelines.factory import checks_job_name

    demo.say(f"asset checks of {spec.name} after the micro-batches (the staleness sensor runs "
             f"them over the late-data horizon):")
    checks = list(demo.sensor_runs(f"{spec.name}_staleness_sensor"))
    before = _print_checks(demo, checks[0] if checks else demo.execute(checks_job_name(spec)))
    ev = demo.nightly(spec)
    if not ev.materializations:
        return before, {}, before
    md = ev.materializations[0][1]
    demo.say(f"backfill: {md.get('backfill_rows_out')} rows for {md.get('event_days_touched')} in "
             f"one commit (output Delta v{md.get('delta_version')}); agreement with the "
             f"micro-batches:")
    for line in str(md.get("difference", "")).splitlines():
        demo.table(f"    {line}")
    demo.say(f"asset checks of {spec.name} after the backfill:")
    return before, md, _print_checks(demo, ev)
