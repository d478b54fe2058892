"""The driver's py4j proxies released in bulk (joins/spark/py4j_release.py): every id still
reaches the JVM's release, in fewer round trips, and nothing else queued is taken."""

from __future__ import annotations

import gc
import time
from collections import deque
from typing import Any

from py4j import protocol
from py4j.java_gateway import JavaObject

from joins.spark.py4j_release import BulkRelease, install_bulk_release


def _bindings(spark: Any) -> Any:
    client = spark.sparkContext._gateway._gateway_client
    return JavaObject(protocol.GATEWAY_SERVER_OBJECT_ID, client).getGateway().getBindings()


def test_dropped_proxies_leave_the_jvm(spark: Any) -> None:
    client = spark.sparkContext._gateway._gateway_client
    assert install_bulk_release(spark)
    assert isinstance(client.__dict__["garbage_collect_object"], BulkRelease)
    bindings = _bindings(spark)
    gc.collect()
    before = int(bindings.size())
    made = [spark._jvm.java.lang.StringBuilder() for _ in range(2_000)]
    ids = [m._target_id for m in made]
    assert all(bindings.containsKey(i) for i in ids[::40])
    del made
    gc.collect()
    # The worker thread sends the queue after the proxies die; give it a moment.
    deadline = time.monotonic() + 30
    kept = int(bindings.size()) - before
    while kept > 100 and time.monotonic() < deadline:
        time.sleep(0.05)
        kept = int(bindings.size()) - before
    assert kept <= 100, f"{kept} of 2,000 objects kept"
    still = sum(bool(bindings.containsKey(i)) for i in ids[::40])
    assert still == 0, f"{still} of 50 dropped proxies' objects are bound"


class _Client:
    """A py4j JavaClient's parts BulkRelease uses."""

    is_connected = True

    def __init__(self) -> None:
        self.finalizer_deque: deque[Any] = deque()

    def garbage_collect_object(self, target_id: str, enqueue: bool = True) -> None:
        self.finalizer_deque.appendleft((self, target_id))


def test_the_worker_sends_what_is_queued_behind_an_id_in_one_call() -> None:
    client, other, calls = _Client(), _Client(), []
    bulk = BulkRelease(client, lambda gateway, ids: calls.append((gateway, ids)), "gw")
    for i in range(5):
        bulk(f"o{i}")                 # a proxy's finalizer: queued, as py4j queues it
    bulk(protocol.ENTRY_POINT_OBJECT_ID)
    client.finalizer_deque.appendleft((other, "o99"))   # another client's id
    bulk("o6")
    client.finalizer_deque.appendleft("shutdown")       # the worker's sentinel
    first = client.finalizer_deque.pop()
    assert first == (client, "o0")
    bulk(first[1], False)            # the worker, woken by o0
    assert calls == [("gw", "o0,o1,o2,o3,o4")]
    # The entry point is never released; the other client's id stops the drain, in place.
    assert list(client.finalizer_deque) == ["shutdown", (client, "o6"), (other, "o99")]


def test_a_release_that_fails_is_dropped_as_py4j_drops_it() -> None:
    client = _Client()

    def refused(gateway: Any, ids: str) -> None:
        raise ConnectionError("the session went away")

    BulkRelease(client, refused, "gw")("o1", False)
    client.is_connected = False
    calls: list[str] = []
    BulkRelease(client, lambda g, ids: calls.append(ids), "gw")("o2", False)
    assert calls == []
