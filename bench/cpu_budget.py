"""Where a stretch of driver work spends its CPU: the driver's Python, and the JVM's by thread role,
JIT compiler and collector; Catalyst's rule time split into analysis and optimization.

A micro-batch of a few records is a ping-pong between the Python driver and its JVM: the wall
time says how long, not who works. `read` before and `budget` after a stretch (a replay round of
`bench.replays --budget`) give, in seconds of CPU:

- `python`: the driver process's own (`time.process_time`);
- `jvm`: the driver JVM's (`/proc/<pid>/stat`, Linux), split into its threads by role from the
  JVM's own per-thread CPU clocks (`ThreadMXBean`): `py4j` (the threads serving the Python
  driver's calls: building and analysing plans, optimizing and planning them, a job's
  driver side, delta-spark's transactions), `tasks` (a local session's executor threads),
  `scheduler` (the DAG scheduler's loop), `other threads`; `jit` (the compilers' time,
  `CompilationMXBean`), `gc` (the collectors'), and `unattributed` (threads that ended before
  the stretch did, such as a file listing's pool, and the VM's own);
- `rules: analysis`, `rules: optimizer`, `rules: other` (delta-spark's and the execution
  layer's rules): Catalyst's rule executors' time (`RuleExecutor`'s metering, process-wide;
  reset by `read`), mostly on the py4j threads and included in them.

Reading the threads costs a few py4j calls per live thread, outside the stretch measured.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from joins.lake.process import stat_fields

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# py4j's server threads are Spark's only unnamed ones ("Thread-N") that do work worth naming.
ROLES = (("Thread-", "py4j"), ("Executor task", "tasks"), ("dag-scheduler", "scheduler"))
THREAD_PARTS = (*(name for _, name in ROLES), "other threads")
RULE_GROUPS = ((".catalyst.analysis.", "rules: analysis"), (".catalyst.optimizer.", "rules: optimizer"))
RULE_OTHER = "rules: other"
# The printed order: the stretch, whose CPU, then the JVM's parts and Catalyst's rules.
ORDER = ("wall", "python", "jvm", *THREAD_PARTS, "jit", "gc", "unattributed",
         *(name for _, name in RULE_GROUPS), RULE_OTHER)
_RULE_ROW = re.compile(r"^(\S+)\s+\d+ / (\d+)\s+\d+ / \d+\s*$")


@dataclass(frozen=True)
class Reading:
    wall: float
    python: float
    jvm: float | None
    jit: float
    gc: float
    threads: dict[int, tuple[str, float]]   # thread id: (role, CPU seconds so far)


def role(thread_name: str) -> str:
    for prefix, name in ROLES:
        if thread_name.startswith(prefix):
            return name
    return "other threads"


def read(spark: SparkSession) -> Reading:
    """The clocks now; Catalyst's rule metering starts again from zero."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    management = jvm.java.lang.management.ManagementFactory
    bean = management.getThreadMXBean()
    java_ids = bean.getAllThreadIds()
    ids, infos = list(java_ids), bean.getThreadInfo(java_ids)
    threads = {}
    for tid, info in zip(ids, infos, strict=True):
        cpu = bean.getThreadCpuTime(tid)
        if info is not None and cpu >= 0:
            threads[tid] = (role(str(info.getThreadName())), cpu / 1e9)
    gc = sum(b.getCollectionTime() for b in management.getGarbageCollectorMXBeans()) / 1000
    jit = management.getCompilationMXBean().getTotalCompilationTime() / 1000
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.resetMetrics()
    return Reading(time.perf_counter(), time.process_time(), _process_cpu(pid), jit, gc, threads)


def budget(spark: SparkSession, before: Reading) -> dict[str, float]:
    """CPU seconds by part since `before` (and `wall`, the stretch's own seconds)."""
    rules = str(spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.dumpTimeSpent())  # type: ignore[attr-defined]
    after = read(spark)
    out: dict[str, float] = {"wall": after.wall - before.wall, "python": after.python - before.python}
    by_role: dict[str, float] = {}
    for tid, (name, cpu) in after.threads.items():
        by_role[name] = by_role.get(name, 0.0) + cpu - before.threads.get(tid, (name, 0.0))[1]
    out.update({name: by_role.get(name, 0.0) for name in THREAD_PARTS})
    out["jit"] = after.jit - before.jit
    out["gc"] = after.gc - before.gc
    if after.jvm is not None and before.jvm is not None:
        out["jvm"] = after.jvm - before.jvm
        out["unattributed"] = out["jvm"] - sum(out[k] for k in (*THREAD_PARTS, "jit", "gc"))
    out.update(rule_seconds(rules))
    return {k: round(v, 3) for k, v in out.items()}


def rule_seconds(dump: str) -> dict[str, float]:
    """Catalyst's per-rule times (RuleExecutor.dumpTimeSpent, nanoseconds) summed by group."""
    out = {name: 0.0 for _, name in RULE_GROUPS} | {RULE_OTHER: 0.0}
    for line in dump.splitlines():
        m = _RULE_ROW.match(line.strip())
        if not m:
            continue
        group = next((name for part, name in RULE_GROUPS if part in m.group(1)), RULE_OTHER)
        out[group] += int(m.group(2)) / 1e9
    return out


def _process_cpu(pid: int) -> float | None:
    """A process's user and system CPU seconds (Linux); None elsewhere."""
    fields = stat_fields(pid)
    # utime and stime, fields 14 and 15
    return None if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lines(parts: dict[str, Any]) -> list[str]:
    """`parts` (as `budget` gives, or their medians) as printed lines, in a fixed order."""
    return [f"    {k:<17} {parts[k]:7.2f} s" for k in ORDER if k in parts]
