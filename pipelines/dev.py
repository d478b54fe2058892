"""`./tj dev` (`python -m pipelines.dev`): the Dagster UI, with a warm Spark for its runs.

Dagster starts a new process for every run; with a local master each of them started its own
JVM and ran its jobs on a cold JIT, so a two-day backfill launched from the UI cost several times
the same backfill in the demo's warm process. Here one local Spark Connect server starts first
(`joins.spark.server`, 127.0.0.1, its own process group) and every run attaches to it through
`TJ_SPARK_REMOTE`; it stays up, warm, until the UI stops.

Not started when the user chose a Spark already (`TJ_SPARK_REMOTE` or `TJ_SPARK_MASTER` set) or
with `TJ_WARM_SPARK=0` (then each run starts a local session, as before).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def warm_spark(log_dir: Path) -> Iterator[dict[str, str]]:
    """The environment the UI's processes need to share one warm Spark: {} when the user chose a
    Spark already or turned this off; else {"TJ_SPARK_REMOTE": url} of a server that lives as
    long as the block."""
    if os.environ.get("TJ_SPARK_REMOTE") or os.environ.get("TJ_SPARK_MASTER") \
            or os.environ.get("TJ_WARM_SPARK", "1") == "0":
        yield {}
        return
    from joins.spark.server import DEFAULT_PORT, LocalConnectServer, free_port

    port = free_port(int(os.environ.get("TJ_CONNECT_PORT", DEFAULT_PORT)))
    print(f"== starting a local Spark Connect server for the UI's runs on port {port} "
          f"(log {log_dir}; TJ_WARM_SPARK=0 runs each on its own session)", file=sys.stderr,
          flush=True)
    with LocalConnectServer(log_dir=log_dir, port=port) as server:
        yield {"TJ_SPARK_REMOTE": server.url}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    from pipelines.instance import prepare_dagster_home

    home = prepare_dagster_home()
    port = os.environ.get("PORT", "3000")
    with warm_spark(home / "spark-connect") as env:
        cmd = [sys.executable, "-m", "dagster", "dev", "-w", str(REPO / "workspace.yaml"),
               "-h", "127.0.0.1", "-p", port, *args]
        proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **env})
        # Ctrl-C reaches dagster through the terminal's process group; a SIGTERM sent to this
        # process is passed on, so that the server below stops after the UI.
        signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
        try:
            return proc.wait()
        except KeyboardInterrupt:
            return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
