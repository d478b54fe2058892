"""Where the first batches of a new process go: the interval join's micro-batches (the
`bench.interval_step` join) in a fresh JVM, with what the JVM did meanwhile.

    .venv/bin/python -m bench.first_batches --joins 2
    .venv/bin/python -m bench.first_batches --java-options "-XX:SharedArchiveFile=app.jsa"

Per step (the session's start, each landing, each batch) the wall time and, read from the
JVM's own counters (`jcmd PerfCounter.print`) and Spark's code-generation metrics, what the
step added: classes loaded and the class loader's time, the JIT compilers' time (their own
threads, beside the step), and Spark's Java code generation (Janino compilations, on the
driver). A second join in the same process tells a process's cost from a join's: its first
batch pays for its new tables, not for a cold JVM. `--java-options` passes options to the
driver's JVM (a class-data archive, say: `-XX:ArchiveClassesAtExit` to build one is not
written here, since the archive is dumped only at a JVM's orderly exit).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.interval_step import DAY_MS, T0_MS, Join


def jvm_counters(spark: Any) -> dict[str, float]:
    """Cumulative: classes loaded, class loading's seconds, JIT seconds, Janino compilations
    and their seconds."""
    jvm = spark._jvm
    pid = jvm.java.lang.ProcessHandle.current().pid()
    out = subprocess.run([shutil.which("jcmd") or "jcmd", str(pid), "PerfCounter.print"],
                         capture_output=True, text=True, check=True).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    hz = int(values["sun.os.hrt.frequency"])
    codegen = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    compiles = codegen.getCount()
    return {"classes": int(values["java.cls.loadedClasses"]),
            "class_s": int(values["sun.cls.time"]) / hz,
            "jit_s": int(values["java.ci.totalTime"]) / hz,
            "janino": compiles,
            # The histogram keeps a sample, not a sum: mean x count, in ms.
            "janino_s": codegen.getSnapshot().getMean() * compiles / 1000}


class Steps:
    """Prints each step with what the JVM's counters gained during it."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.last = {k: 0.0 for k in ("classes", "class_s", "jit_s", "janino", "janino_s")}

    def report(self, label: str, wall_s: float) -> None:
        now = jvm_counters(self.spark)
        d = {k: now[k] - self.last[k] for k in now}
        self.last = now
        print(f"{label:<28} {wall_s:6.2f} s   classes {d['classes']:6.0f} ({d['class_s']:5.2f} s)"
              f"   JIT {d['jit_s']:6.2f} s   Janino {d['janino']:3.0f} ({d['janino_s']:4.2f} s)",
              flush=True)


def one_join(spark: Any, steps: Steps, label: str, batches: int, seed: int) -> None:
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="tj-first-batches-") as tmp:
        join = Join(spark, Path(tmp))
        # Each join its own rows and times: a join landing the same values as an earlier one
        # would find their stages' code compiled already.
        join.rng = np.random.default_rng(seed)
        t0 = T0_MS + seed * 7 * DAY_MS
        for n in range(batches + 1):
            started = time.perf_counter()
            if n == 0:
                join.land(10_000, t0, DAY_MS)
            else:
                join.land(10_000, t0 + DAY_MS + (n - 1) * 60_000, 60_000)
            steps.report(f"{label} landing {n}", time.perf_counter() - started)
            started = time.perf_counter()
            join.run()
            steps.report(f"{label} batch {n}" + (" (buffers)" if n == 0 else ""),
                         time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--joins", type=int, default=2)
    parser.add_argument("--batches", type=int, default=4, help="after the buffering one")
    parser.add_argument("--java-options", default="", help="for the driver's JVM")
    args = parser.parse_args(argv)
    from joins.spark import SparkSettings, get_spark

    settings = SparkSettings(shuffle_partitions=4, driver_memory="4g")
    if args.java_options:
        settings = replace(settings, extra_conf={"spark.driver.extraJavaOptions": args.java_options})
    started = time.perf_counter()
    spark = get_spark(settings)
    steps = Steps(spark)
    steps.report("session", time.perf_counter() - started)
    for k in range(args.joins):
        one_join(spark, steps, f"join {k}", args.batches, seed=11 + k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
