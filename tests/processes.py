"""Two warm processes for the tests about two processes (one writer per join, ingests racing,
first writes racing): each is a spawned Python with a SparkSession of its own, kept for the whole
test session and handed one call at a time.

A process per test started a JVM and ran its first batches with a cold JIT: tens of seconds a
process, two per test. What these tests prove needs two processes with their own sessions and
leases at once, not new ones: a call runs a module-level function (sent by reference) there and
hands back its result, or fails the test with the process's traceback. The functions clean up
what they install in the process (failpoints) when they end.

Synchronisation objects (events, queues, barriers) come from a manager (`Pair.event()`...): its
proxies can be sent to a running process, the primitives of `multiprocessing` only to a new one.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

CTX = mp.get_context("spawn")
START_TIMEOUT_S = 300


def _serve(conn: Any, spark_conf: dict[str, str]) -> None:
    from joins.spark import SparkSettings, get_spark

    try:
        get_spark(SparkSettings(master="local[1]", shuffle_partitions=1, driver_memory="1g",
                                extra_conf=spark_conf))
        conn.send(("ready", None))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        message = conn.recv()
        if message is None:
            return
        fn, args = message
        try:
            conn.send(("ok", fn(*args)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))


class Call:
    """One function running in a warm process."""

    def __init__(self, process: WarmProcess, name: str) -> None:
        self.process, self.name = process, name
        self._outcome: tuple[str, Any] | None = None

    def done(self, timeout_s: float = 0.0) -> bool:
        if self._outcome is None and self.process.conn.poll(timeout_s):
            self._outcome = self.process.conn.recv()
            self.process.busy = None
        return self._outcome is not None

    def result(self, timeout_s: float = 600) -> Any:
        if not self.done(timeout_s):
            raise AssertionError(f"{self.name} did not end within {timeout_s:.0f} s")
        assert self._outcome is not None
        status, value = self._outcome
        if status != "ok":
            raise AssertionError(f"{self.name} failed in process {self.process.pid}:\n{value}")
        return value


@dataclass
class WarmProcess:
    proc: Any
    conn: Any
    busy: Call | None = None

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def ready(self) -> None:
        if not self.conn.poll(START_TIMEOUT_S):
            raise AssertionError(f"process {self.pid} built no SparkSession in {START_TIMEOUT_S} s")
        status, value = self.conn.recv()
        if status != "ready":
            raise AssertionError(f"process {self.pid} could not start Spark:\n{value}")

    def call(self, fn: Callable[..., Any], *args: Any) -> Call:
        if self.busy is not None and not self.busy.done():
            raise AssertionError(f"process {self.pid} is still running {self.busy.name}")
        self.conn.send((fn, args))
        self.busy = Call(self, f"{fn.__name__} in process {self.pid}")
        return self.busy

    def stop(self) -> None:
        try:
            if self.busy is None or self.busy.done():
                self.conn.send(None)
                self.proc.join(30)
        finally:
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(30)


@dataclass
class Pair:
    """Two warm processes and the manager their synchronisation objects come from."""

    processes: tuple[WarmProcess, WarmProcess]
    manager: Any = field(repr=False)

    def __iter__(self) -> Iterator[WarmProcess]:
        return iter(self.processes)

    def __getitem__(self, i: int) -> WarmProcess:
        return self.processes[i]

    def event(self) -> Any:
        return self.manager.Event()

    def queue(self) -> Any:
        return self.manager.Queue()

    def barrier(self, parties: int) -> Any:
        return self.manager.Barrier(parties)

    def check_idle(self) -> None:
        """Between tests: a call that never ended would run into the next test."""
        for p in self.processes:
            if p.busy is not None and not p.busy.done(30):
                raise AssertionError(f"process {p.pid} is still running {p.busy.name}")


@contextmanager
def warm_pair(spark_conf: dict[str, str]) -> Iterator[Pair]:
    manager = CTX.Manager()
    started: list[WarmProcess] = []
    try:
        for _ in range(2):
            parent, child = CTX.Pipe()
            proc = CTX.Process(target=_serve, args=(child, spark_conf), daemon=True)
            proc.start()
            started.append(WarmProcess(proc, parent))
        for p in started:  # both JVMs start at once
            p.ready()
        yield Pair((started[0], started[1]), manager)
    finally:
        for p in started:
            p.stop()
        manager.shutdown()
