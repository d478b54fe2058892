"""The driver's py4j proxies released in bulk, not one round trip each.

Every JVM object Python holds (a Column, a DataFrame, a plan's pieces) stays in the JVM until
its Python proxy dies; then PySpark's py4j (its pinned-thread `ClientServer`) queues the id, and
a background thread (`FinalizerWorker`) sends one `m d` command per id, each a round trip whose
both ends take CPU: about 40 µs of Python (against the main thread, for the GIL) and 20 µs of
the JVM's. A single-record micro-batch releases some 460 proxies. Here the worker, woken by one
id, takes every id queued behind it and sends them in one call (`temporaljoins.Py4jRelease`).

Installed once per driver process by `joins.spark.session` for classic sessions whose JVM has
the engine's jar; anything else keeps py4j's own path. Nothing else changes: an id is still
released only once its proxy has died, by the same thread; the ids behind it go sooner than
py4j's one at a time would send them.
"""

from __future__ import annotations

import logging
from typing import Any

from py4j import protocol
from py4j.java_gateway import JavaObject

log = logging.getLogger(__name__)

MAX_IDS = 5_000  # ids a call: ~40 KB of command text
# Ids py4j itself never releases: the entry point, the gateway server.
_NEVER = {protocol.ENTRY_POINT_OBJECT_ID, protocol.GATEWAY_SERVER_OBJECT_ID}


class BulkRelease:
    """`garbage_collect_object` for one py4j `JavaClient`: as py4j's when queueing an id (the
    caller is a proxy's finalizer), in bulk when sending (the caller is the worker thread)."""

    def __init__(self, client: Any, release: Any, gateway: JavaObject) -> None:
        self._client = client
        self._queued = type(client).garbage_collect_object
        self._release = release
        self._gateway = gateway

    def __call__(self, target_id: str, enqueue: bool = True) -> None:
        if enqueue:
            self._queued(self._client, target_id, True)
            return
        ids = self._drain(target_id)
        if not ids or not self._client.is_connected:
            return
        try:
            self._release(self._gateway, ",".join(ids))
        except Exception:  # as py4j's own: a session going away may refuse the last releases
            log.debug("releasing %d py4j objects failed", len(ids), exc_info=True)

    def _drain(self, first: str) -> list[str]:
        """`first` and the ids queued behind it for this client (the queue's other entries, the
        worker's shutdown sentinel or another client's id, go back where they were)."""
        queue = self._client.finalizer_deque
        ids = [first] if first not in _NEVER else []
        while len(ids) < MAX_IDS:
            try:
                task = queue.pop()
            except IndexError:
                break
            if not (isinstance(task, tuple) and task[0] is self._client):
                queue.append(task)
                break
            if task[1] not in _NEVER:
                ids.append(task[1])
        return ids


def install_bulk_release(spark: Any) -> bool:
    """Route the session's py4j releases through `BulkRelease` (once per process). False where
    py4j is not the pinned-thread client this relies on, or the engine's jar is not loaded."""
    from joins.spark import jvm
    from joins.spark.names import jvm_class

    client = spark.sparkContext._gateway._gateway_client
    if isinstance(client.__dict__.get("garbage_collect_object"), BulkRelease):
        return True
    if getattr(client, "finalizer_deque", None) is None or jvm.unavailable_reason(spark) is not None:
        return False
    gateway = JavaObject(protocol.GATEWAY_SERVER_OBJECT_ID, client).getGateway()
    release = jvm_class(spark._jvm, "temporaljoins.Py4jRelease").release
    client.garbage_collect_object = BulkRelease(client, release, gateway)
    return True
