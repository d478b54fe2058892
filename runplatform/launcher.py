"""The run launcher `./tj dev` configures: each run goes to the warm run worker
(`runplatform.run_worker`) when one is up, else to a process of its own (Dagster's default
launcher, which this extends). See `runplatform/instance.py` for where it is set."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from resources.dagster_private import DefaultRunLauncher, LaunchRunContext
from runplatform.run_worker import WORKER_FILE

WORKER_TAG = "temporal_joins/run_worker"
# The worker only queues the run before it answers, but on a loaded machine (its own Spark
# job running, two cores) that answer can take seconds. The request is idempotent (the worker
# queues a run id once), so an unanswered one is asked again before the run goes elsewhere.
_TIMEOUT_S = 10.0
_ATTEMPTS = 3


def worker_url(home: str | Path) -> str | None:
    """The run worker's address, if one said it is serving this Dagster home."""
    try:
        return str(json.loads((Path(home) / WORKER_FILE).read_text())["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def send_to_worker(home: str | Path, run_id: str) -> tuple[dict[str, Any] | None, str]:
    """(the worker's answer, "") when it took the run; (None, why not) otherwise."""
    url = worker_url(home)
    if url is None:
        return None, "no run worker is serving this Dagster home"
    request = urllib.request.Request(f"{url}/runs", data=json.dumps({"run_id": run_id}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    why = ""
    for _ in range(_ATTEMPTS):
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
                return json.loads(response.read()), ""
        except urllib.error.HTTPError as exc:
            return None, f"the run worker refused the run (HTTP {exc.code})"
        except (OSError, ValueError) as exc:
            why = f"the run worker at {url} does not answer ({exc})"
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ConnectionRefusedError):
                # Nothing listens: the worker never saw the run; safe to run it elsewhere now.
                return None, why
    # If the worker took the run after all, it finds it started elsewhere and skips it.
    return None, why


class WarmWorkerRunLauncher(DefaultRunLauncher):
    """Runs go to the warm run worker; a process per run when none is up."""

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        taken, why_not = send_to_worker(self._instance.root_directory, run.run_id)
        if taken is None:
            self._instance.report_engine_event(
                f"A process of its own for this run: {why_not}", run, cls=self.__class__)
            super().launch_run(context)
            return
        self._instance.add_run_tags(run.run_id, {WORKER_TAG: str(taken.get("pid"))})
        if taken.get("ahead"):
            self._instance.report_engine_event(
                f"Waiting in the warm run worker behind {taken['ahead']} run(s): it runs one at "
                "a time", run, cls=self.__class__)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        if run is None or WORKER_TAG not in run.tags:
            return super().terminate(run_id)
        if run.is_finished:
            return False
        # The worker polls the run's status between events and stops it at the next one.
        self._instance.report_run_canceling(run, message="Terminating: the warm run worker "
                                            "stops the run at its next event (a step boundary)")
        return True
